"""What both halves of the SQLite backend share: error mapping, write transactions, times."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from ..errors import BackendError, BackendUnavailable, DuplicateJob


def dt(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def opt_dt(value: float | None) -> datetime | None:
    return None if value is None else dt(value)


@contextmanager
def wrapped(operation: str) -> Iterator[None]:
    """Re-raise sqlite3 errors as skiplock errors, keeping the original as ``__cause__``."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        raise BackendUnavailable(f"{operation}: SQLite: {exc}") from exc
    except sqlite3.IntegrityError as exc:
        if "skiplock_jobs.unique_key" in str(exc):  # a retry meets a live holder
            raise DuplicateJob(f"{operation}: a live job already holds the unique key") from exc
        raise BackendError(f"{operation}: SQLite: {exc}") from exc
    except sqlite3.Error as exc:
        raise BackendError(f"{operation}: SQLite: {exc}") from exc


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction that holds the file's write lock from its first statement."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
