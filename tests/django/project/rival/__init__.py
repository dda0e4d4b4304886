"""An app that also ships a ``concurrent_worker`` command (the command-name collision test)."""
