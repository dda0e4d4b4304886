"""Integrations with frameworks (Django, Starlette/FastAPI); each imports its framework only
when it is imported itself, so `import skiplock` never does."""
