"""Transactional enqueue through SQLAlchemy: the driver connection under a Session or Connection.

``task.using(connection=session)`` takes a SQLAlchemy ``AsyncSession``/``AsyncConnection`` or a
sync ``Session``/``Connection`` (scoped sessions too) on the asyncpg, psycopg, sqlite3 or
aiosqlite drivers. The rows go through the driver connection of the session's current
transaction, so they commit, roll back (a savepoint's rollback included) and wake workers with
it: skiplock runs its own SQL on the very connection SQLAlchemy will COMMIT.

SQLAlchemy stays an optional extra (``pip install skiplock[sqlalchemy]``): nothing imports it
until an object whose class comes from it is passed, and then it is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._backends.params import JobInsertManyParams
from ._backends.workflow_params import WorkflowEnqueueParams, WorkflowEnqueueSyncParams
from ._job import NewJob

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection

    from ._backends.protocol import Backend
    from ._backends.workflow_plan import Plan


def is_sqlalchemy(connection: object) -> bool:
    """True for SQLAlchemy's sessions and connections, told apart without importing it."""
    return type(connection).__module__.startswith("sqlalchemy.")


async def insert_many(backend: Backend, jobs: Sequence[NewJob], connection: object) -> list[int]:
    """``backend.job_insert_many`` on the driver connection under an async session."""
    driver = await _driver_connection(await _async_connection(connection))
    if _is_aiosqlite(driver):
        # aiosqlite owns its sqlite3 connection on a thread of its own: the insert runs there,
        # as SQLAlchemy's own aiosqlite adapter does (through the same two attributes).
        aio: Any = driver
        ids: list[int] = await aio._execute(
            backend.job_insert_many_sync, JobInsertManyParams(jobs, aio._conn)
        )
        return ids
    return await backend.job_insert_many(JobInsertManyParams(jobs, driver))


async def enqueue_plan(backend: Backend, plan: Plan, connection: object) -> list[int]:
    """``backend.workflow_enqueue`` on the driver connection under an async session."""
    driver = await _driver_connection(await _async_connection(connection))
    if _is_aiosqlite(driver):  # on aiosqlite's own thread, as ``insert_many``
        aio: Any = driver
        params = WorkflowEnqueueSyncParams(plan, aio._conn)
        ids: list[int] = await aio._execute(backend.workflow_enqueue_sync, params)
        return ids
    return await backend.workflow_enqueue(WorkflowEnqueueParams(plan, driver))


async def driver_connection(connection: object) -> object:
    """The driver connection (asyncpg, psycopg) under an async Session or Connection."""
    return await _driver_connection(await _async_connection(connection))


def driver_connection_sync(connection: object) -> object:
    """The driver connection (sqlite3, psycopg) under a sync Session or Connection."""
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session, scoped_session

    if type(connection).__module__.startswith("sqlalchemy.ext.asyncio"):
        raise TypeError("connection: an async SQLAlchemy session needs `await task.aenqueue(...)`")
    if isinstance(connection, Connection):
        conn = connection
    elif isinstance(connection, Session | scoped_session):
        conn = connection.connection()
    else:
        raise TypeError(f"connection: a SQLAlchemy {type(connection).__name__} is not accepted")
    _begun(conn)
    return conn.connection.driver_connection


def _begun(conn: Connection) -> None:
    """Begin SQLAlchemy's transaction if nothing has (what its first statement would do)."""
    if not conn.in_transaction():
        conn.begin()


async def _async_connection(connection: object) -> AsyncConnection:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_scoped_session

    if isinstance(connection, AsyncConnection):
        conn = connection
    elif isinstance(connection, AsyncSession | async_scoped_session):
        conn = await connection.connection()  # joins (or begins) the session's transaction
    else:
        raise TypeError(
            f"connection: a sync SQLAlchemy {type(connection).__name__} needs "
            "`task.using(connection=...).enqueue(...)`, not aenqueue"
        )
    if not conn.in_transaction():
        await conn.begin()
    return conn


async def _driver_connection(conn: AsyncConnection) -> object:
    """The driver connection, inside a driver-level transaction.

    SQLAlchemy's asyncpg adapter opens asyncpg's transaction lazily, at its first statement:
    on a session that never flushed, a row inserted straight through asyncpg would commit on
    its own. One trivial statement through SQLAlchemy opens it (psycopg and sqlite3 begin
    implicitly at skiplock's own first statement, as they would at SQLAlchemy's).
    """
    raw = await conn.get_raw_connection()
    driver = raw.driver_connection
    if callable(getattr(driver, "is_in_transaction", None)) and not driver.is_in_transaction():  # type: ignore[union-attr]
        from sqlalchemy import literal, select

        await conn.scalar(select(literal(1)))
    return driver


def _is_aiosqlite(driver: object) -> bool:
    return type(driver).__module__.startswith("aiosqlite.")
