"""Integrations with web frameworks; each imports its framework only when imported itself."""
