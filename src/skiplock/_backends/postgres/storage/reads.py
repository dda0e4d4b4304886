"""PostgreSQL's reads for people (the dashboard, ``skiplock stats``, the CLI's lists, a worker's
gauges): each short, and on the live segments for a moment only.

Every session holding a lock on a live segment, ``ACCESS SHARE`` included, keeps the rotation
from truncating it (``rotation.rotate_live``): the truncate waits 10 ms for its lock,
then gives up and backs off. A read of the whole job table in one statement, or in one
transaction, holds the segments' locks for as long as it reads the history: a statistics
reading over a five-minute window of 290,000 finished jobs took 1.8 to 2.7 s, every refresh of
the dashboard's Overview and of a worker's gauges, and every one of those seconds the rotation
could not run. So:

- A read that needs only one state reads that state's partition by name
  (``skiplock_jobs_dead``, ``skiplock_jobs_done``, ``skiplock_jobs_live``,
  ``skiplock_jobs_waiting``): a list of dead jobs never plans, locks or waits on a live
  segment, whatever plan the server keeps for it (a generic plan of a statement filtering on
  ``state = $1`` locks every partition).
- A read of every state runs as two parts on one snapshot (``split``): the live part (pending
  and running jobs) in a transaction that locks the live partition before it takes its snapshot,
  exports that snapshot, reads and commits at once; the rest (history, dead and waiting jobs) in
  a second session that imported the snapshot before the live one ended, and names no live
  table, so however long it reads it holds nothing a rotation waits for. The numbers are those
  of the one-statement read (one snapshot, one ``now``), and the live segments are held for the
  live statements alone. Why lock before the snapshot: a segment truncated between a snapshot
  and the lock would read as empty (``TRUNCATE`` is not MVCC-safe), while the jobs the rotation
  moved out of it are invisible to the older snapshot in the long segment; a lock taken first
  makes the truncate wait for the few milliseconds the live statements take.
- Both wait at most ``READ_LOCK_TIMEOUT_MS`` for a lock: behind the storage upkeep's DDL (which
  gives up after 100 ms itself) a read waits its turn; behind a migration, or a person's
  ``LOCK TABLE``, it fails in two seconds with a message saying so rather than hang a page.

The rest's session comes from a pool of its own (two sessions), taken before the live one: a
reading never waits for a second session of the main pool while holding one of it, so readings
running at once cannot take every session of the main pool and wait for each other.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from . import QUERIES

READ_LOCK_TIMEOUT_MS = 2000
"""How long a person's read waits for a lock on a job table before it fails."""

LIVE = "state IN ('pending', 'running')"
"""The live part of a split read: the live partition (its segments), alone."""

REST = "state IN ('succeeded', 'cancelled', 'dead', 'waiting')"
"""The rest: history, dead and waiting jobs, every partition but the live one."""

PART = "/*part*/"
"""Where a statement read in two parts takes ``AND <LIVE or REST>`` (a comment otherwise)."""

TABLES = {
    "pending": "skiplock_jobs_live",
    "running": "skiplock_jobs_live",
    "succeeded": "skiplock_jobs_done",
    "cancelled": "skiplock_jobs_done",
    "dead": "skiplock_jobs_dead",
    "waiting": "skiplock_jobs_waiting",
}
"""The partition each state's rows are in."""

LIVE_TABLE = "skiplock_jobs_live"

A = TypeVar("A")
B = TypeVar("B")


@functools.lru_cache(maxsize=256)
def part(statement: str, condition: str) -> str:
    """``statement`` restricted to one part (LIVE or REST)."""
    if PART not in statement:
        raise AssertionError("a statement read in parts has a /*part*/ marker")
    return statement.replace(PART, f"AND {condition}")


@functools.lru_cache(maxsize=256)
def in_table(statement: str, schema: str, state: str) -> str:
    """``statement``, which reads ``skiplock_jobs`` once, reading ``state``'s partition instead
    (its own filters, ``state = $1`` among them, kept)."""
    quoted = re.escape(f'"{schema}".skiplock_jobs') + r"(?![A-Za-z0-9_])"
    out, n = re.subn(quoted, f'"{schema}".{TABLES[state]}', statement)
    if n != 1:
        raise AssertionError(f"a statement read by partition names skiplock_jobs once, not {n}")
    return out


def _lock_first(schema: str) -> str:
    return (
        f"SET LOCAL lock_timeout = {READ_LOCK_TIMEOUT_MS}; "
        f'LOCK TABLE "{schema}".{LIVE_TABLE} IN ACCESS SHARE MODE'
    )


EXPORT = QUERIES["EXPORT"]
"""The live part's first statement after its lock: the reading's instant (the pinned $1, else
the database's now, the transaction's start) and its snapshot, for the rest to import."""


def _import(snapshot: str) -> str:
    quoted = snapshot.replace("'", "''")
    return f"SET TRANSACTION SNAPSHOT '{quoted}'; SET LOCAL lock_timeout = {READ_LOCK_TIMEOUT_MS}"


class Reads:
    """The reads of one backend: its main pool and the rest's pool (``connection`` opens both)."""

    def __init__(
        self, pool: Callable[[], asyncpg.Pool], rest_pool: Callable[[], asyncpg.Pool], schema: str
    ) -> None:
        self._pool, self._rest_pool, self.schema = pool, rest_pool, schema

    async def one(self, how: str, statement: str, *args: Any) -> Any:
        """One statement (``how``: fetch, fetchrow or fetchval) in a read-only transaction of
        its own under the read lock timeout (READ COMMITTED: its snapshot is taken after its
        locks, so a truncate cannot come between them)."""
        async with self._pool().acquire() as conn, conn.transaction(readonly=True):
            await conn.execute(f"SET LOCAL lock_timeout = {READ_LOCK_TIMEOUT_MS}")
            return await getattr(conn, how)(statement, *args)

    async def by_state(self, how: str, statement: str, state: str, *args: Any) -> Any:
        """``statement`` on ``state``'s partition alone (``one``)."""
        return await self.one(how, in_table(statement, self.schema, state), *args)

    async def split(
        self,
        live: Callable[[Any, Any], Awaitable[A]],
        rest: Callable[[Any, Any], Awaitable[B]],
        now: Any = None,
    ) -> tuple[Any, A, B]:
        """(now, live(conn, now), rest(conn, now)) on one snapshot: the live part first, in a
        transaction that holds the live partition from before its snapshot until it commits,
        then the rest on that snapshot in a session that never names the live partition.
        ``now`` pins the reading's instant (tests); None takes the database's."""
        async with (
            self._rest_pool().acquire() as rest_conn,
            rest_conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            async with (
                self._pool().acquire() as live_conn,
                live_conn.transaction(isolation="repeatable_read", readonly=True),
            ):
                await live_conn.execute(_lock_first(self.schema))
                row = await live_conn.fetchrow(EXPORT, now)
                assert row is not None  # one row, always
                at = row["now"]
                await rest_conn.execute(_import(row["snapshot"]))
                live_rows = await live(live_conn, at)
            return at, live_rows, await rest(rest_conn, at)


async def fetch_parts(
    reads: Reads, statement: str, *args: Any
) -> tuple[list[asyncpg.Record], list[asyncpg.Record]]:
    """``statement``'s rows in its live part and in the rest, on one snapshot."""

    async def live(conn: Any, _at: Any) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await conn.fetch(part(statement, LIVE), *args)
        return rows

    async def rest(conn: Any, _at: Any) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await conn.fetch(part(statement, REST), *args)
        return rows

    _, live_rows, rest_rows = await reads.split(live, rest)
    return live_rows, rest_rows
