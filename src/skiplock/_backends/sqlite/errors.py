"""sqlite3 errors -> skiplock errors: an outage (waiting may fix it), a schema never migrated,
or a fault (no retry cures it)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from ...errors import BackendError, BackendUnavailable, DuplicateJob, SchemaError

OUTAGE_CODES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_PROTOCOL,
    }
)
"""Primary result codes that say "the file cannot be used right now", which waiting can fix.
Every other error (no such column, a broken constraint) is a fault no retry will cure."""


@contextmanager
def wrapped(operation: str) -> Iterator[None]:
    """Re-raise sqlite3 errors as skiplock errors, keeping the original as ``__cause__``."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        if ".unique_key" in str(exc):  # a retry meets a live holder (skiplock_jobs_live)
            raise DuplicateJob(f"{operation}: a live job already holds the unique key") from exc
        raise BackendError(f"{operation}: SQLite: {exc}") from exc
    except sqlite3.Error as exc:
        raise classify(operation, exc) from exc


def classify(operation: str, exc: sqlite3.Error) -> Exception:
    """An outage, a schema never migrated, or any other fault, by SQLite's result code."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in OUTAGE_CODES:
        return BackendUnavailable(f"{operation}: SQLite: {exc}")
    if str(exc).startswith("no such table: skiplock_"):
        return SchemaError(f"{operation}: SQLite: {exc}: run `skiplock migrate` first")
    return BackendError(f"{operation}: SQLite: {exc}")
