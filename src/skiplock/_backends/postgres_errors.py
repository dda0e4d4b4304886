"""How asyncpg's errors become skiplock's, for every PostgreSQL operation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg

from ..errors import BackendError, BackendUnavailable, DuplicateJob

CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.TooManyConnectionsError,
    # A connection left mid-operation by a dropped socket ("cannot switch to state ...").
    asyncpg.exceptions.InternalClientError,
)


@contextmanager
def wrapped(operation: str) -> Iterator[None]:
    """Re-raise driver errors as skiplock errors, keeping the driver's as ``__cause__``."""
    try:
        yield
    except CONNECTION_ERRORS as exc:
        raise BackendUnavailable(f"{operation}: PostgreSQL unavailable: {exc}") from exc
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name == "skiplock_jobs_unique_idx":  # a retry meets a live holder
            raise DuplicateJob(f"{operation}: a live job already holds the unique key") from exc
        raise BackendError(f"{operation}: {exc}") from exc
    except asyncpg.PostgresError as exc:
        raise BackendError(f"{operation}: {exc}") from exc
