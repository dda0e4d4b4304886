"""SQLite, one package (issue 45's rooms): ``skiplock._backends.sqlite`` names the backend the
registry loads."""

from .backend import SQLiteBackend

SQLiteBackend.__module__ = __name__  # where the registry's dotted path finds it

__all__ = ["SQLiteBackend"]
