"""SQLite, one package (issue 45's rooms): ``skiplock._backends.sqlite`` names the backend the
registry loads."""

from .backend import SQLiteBackend

__all__ = ["SQLiteBackend"]
