"""How asyncpg's errors become skiplock's, for every PostgreSQL operation."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import asyncpg

from ...errors import BackendError, BackendUnavailable, DuplicateJob, SchemaError, UrlRefused

CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.exceptions.PostgresConnectionError,  # SQLSTATE class 08, whatever the subclass
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.TooManyConnectionsError,
    # A connection left mid-operation by a dropped socket ("cannot switch to state ...").
    asyncpg.exceptions.InternalClientError,
    # The server shutting down or cancelling (class 57), out of resources (53), or a
    # transaction rolled back to break a deadlock or a serialisation conflict (40): the same
    # statement run again can succeed.
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
    asyncpg.exceptions.TransactionRollbackError,
)
"""What an outage looks like; any other PostgreSQL error is a fault no retry will cure."""


T = TypeVar("T")

MOVED_TRIES = 8
"""How often a statement that met a row moved to another partition is run again."""


def moved(exc: BaseException) -> bool:
    """Whether ``exc`` is PostgreSQL refusing to lock a row a concurrent, committed UPDATE
    moved to another partition (a job that finished, or was requeued, under our feet).

    On a plain table the statement would have re-read the row's new version and found it no
    longer matching; across partitions PostgreSQL raises instead (SQLSTATE 40001). The same
    statement run again reads the row where it went and, its state and token changed, leaves it
    alone, so the operations that lock job rows run again rather than report an outage.
    """
    return isinstance(
        exc, asyncpg.exceptions.SerializationError
    ) and "moved to another partition" in str(exc)


def ended_session(exc: BaseException) -> bool:
    """Whether ``exc`` is asyncpg refusing to start a statement on a pooled connection whose
    session the server ended a moment ago (``pg_terminate_backend``, a failover, an idle
    reaper): the server's FATAL message had arrived, the socket's close not yet, and the pool
    handed the connection out in between ("cannot switch to state 12; another operation (2)
    is in progress", state 2 being the consumption of that error).

    Nothing of the statement reached the server, so running it again is safe; the pool
    replaces the connection when it comes back (its reset fails, so it is terminated)."""
    return isinstance(
        exc, asyncpg.exceptions.InternalClientError
    ) and "cannot switch to state" in str(exc)


ENDED_SESSION_TRIES = 3
"""How often a statement that met a pooled connection its server had just ended is tried: the
pool may hold several such connections after a mass termination."""


async def retry_moved(call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, run again while it meets a moved row (``moved``), at most MOVED_TRIES times,
    and while it meets a connection the server had just ended (``ended_session``), at most
    ENDED_SESSION_TRIES times: neither is an outage, and neither statement ran."""
    moves = ends = 0
    while True:
        try:
            return await call()
        except asyncpg.exceptions.SerializationError as exc:
            moves += 1
            if not moved(exc) or moves >= MOVED_TRIES:
                raise
        except asyncpg.exceptions.InternalClientError as exc:
            ends += 1
            if not ended_session(exc) or ends >= ENDED_SESSION_TRIES:
                raise
            await asyncio.sleep(0)  # let the loop see the socket's close


def _misconfigured(operation: str, exc: Exception) -> UrlRefused:
    """An option of the URL the driver refuses (``?sslmode=bogus``): a person must fix it,
    so it is not an outage to retry (asyncpg files it under InterfaceError, as outages)."""
    return UrlRefused(f"{operation}: the database URL: {exc}")


@contextmanager
def connecting(address: str, timeout_s: float) -> Iterator[None]:
    """Name the address in a failed connect, and say "timed out" where the driver's
    TimeoutError says nothing (its str() is empty)."""
    try:
        yield
    except asyncpg.exceptions.ClientConfigurationError as exc:
        raise _misconfigured("connect", exc) from exc
    except TimeoutError as exc:
        raise BackendUnavailable(
            f"connect: PostgreSQL at {address} unavailable: timed out after {timeout_s:g} s"
        ) from exc
    except CONNECTION_ERRORS as exc:
        raise BackendUnavailable(f"connect: PostgreSQL at {address} unavailable: {exc}") from exc


@contextmanager
def wrapped(operation: str) -> Iterator[None]:
    """Re-raise driver errors as skiplock errors, keeping the driver's as ``__cause__``."""
    try:
        yield
    except asyncpg.exceptions.ClientConfigurationError as exc:
        raise _misconfigured(operation, exc) from exc
    except CONNECTION_ERRORS as exc:
        reason = str(exc) or type(exc).__name__  # a TimeoutError says nothing itself
        if ended_session(exc):
            reason = f"the server ended the session of a pooled connection ({reason})"
        raise BackendUnavailable(f"{operation}: PostgreSQL unavailable: {reason}") from exc
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name == "skiplock_jobs_unique_idx":  # a retry meets a live holder
            raise DuplicateJob(f"{operation}: a live job already holds the unique key") from exc
        raise BackendError(f"{operation}: {exc}") from exc
    except asyncpg.UndefinedTableError as exc:
        raise SchemaError(f"{operation}: {exc}: run `skiplock migrate` first") from exc
    except asyncpg.exceptions.LockNotAvailableError as exc:  # a person's read, given up
        raise BackendError(
            f"{operation}: {exc}: another session holds a lock on a table this reads (a "
            "migration, a LOCK TABLE, a storage change); try again when it ends"
        ) from exc
    except asyncpg.PostgresError as exc:
        raise BackendError(f"{operation}: {exc}") from exc
