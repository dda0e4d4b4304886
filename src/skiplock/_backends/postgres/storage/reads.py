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
  ``state = $1`` locks every partition). Each such statement's text on each partition is a
  named statement of ``queries/reads.sql`` (``IN_PARTITION``).
- A read of every state runs as two parts on one snapshot (``split``): the live part (pending
  and running jobs) in a transaction that locks the live partition before it takes its snapshot,
  exports that snapshot, reads and commits at once; the rest (history, dead and waiting jobs) in
  a second session that imported the snapshot before the live one ended, and names no live
  table, so however long it reads it holds nothing a rotation waits for. The numbers are those
  of the one-statement read (one snapshot, one ``now``), and the live segments are held for the
  live statements alone (each part of each such statement a named statement of
  ``queries/reads.sql``, ``PARTS``, its ``/*part*/`` written out). Why lock before the
  snapshot: a segment truncated between a snapshot and the lock would read as empty
  (``TRUNCATE`` is not MVCC-safe), while the jobs the rotation moved out of it are invisible to
  the older snapshot in the long segment; a lock taken first makes the truncate wait for the
  few milliseconds the live statements take.
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
from typing import Any, NamedTuple, TypeVar

import asyncpg

from ...sql_files import fill, fill_names, quote_literal, with_schema
from .. import statements
from . import QUERIES

READ_LOCK_TIMEOUT_MS = 2000
"""How long a person's read waits for a lock on a job table before it fails."""

PARTS: dict[str, tuple[str, str]] = {
    "JOB_COUNT_BY_STATE": ("JOB_COUNT_BY_STATE_LIVE_PART", "JOB_COUNT_BY_STATE_REST_PART"),
    "JOB_COUNT_BY_QUEUE": ("JOB_COUNT_BY_QUEUE_LIVE_PART", "JOB_COUNT_BY_QUEUE_REST_PART"),
    "JOB_LIST": ("JOB_LIST_LIVE_PART", "JOB_LIST_REST_PART"),
    "JOB_LIST_OLDEST": ("JOB_LIST_OLDEST_LIVE_PART", "JOB_LIST_OLDEST_REST_PART"),
    "JOB_COUNT": ("JOB_COUNT_LIVE_PART", "JOB_COUNT_REST_PART"),
    "JOB_COUNT_STATES": ("JOB_COUNT_STATES_LIVE_PART", "JOB_COUNT_STATES_REST_PART"),
    "JOB_FIND": ("JOB_FIND_LIVE_PART", "JOB_FIND_REST_PART"),
}
"""Each statement read in two parts (its ``/*part*/`` marks where), and its two parts as named
statements of ``queries/reads.sql``: the live part (``AND state IN ('pending', 'running')``:
the live partition, its segments, alone) and the rest (``AND state IN ('succeeded',
'cancelled', 'dead', 'waiting')``: every partition but the live one)."""

IN_PARTITION: dict[str, tuple[str, str, str, str]] = {
    "JOB_LIST": ("JOB_LIST_IN_LIVE", "JOB_LIST_IN_DONE", "JOB_LIST_IN_DEAD", "JOB_LIST_IN_WAITING"),
    "JOB_LIST_OLDEST": (
        "JOB_LIST_OLDEST_IN_LIVE",
        "JOB_LIST_OLDEST_IN_DONE",
        "JOB_LIST_OLDEST_IN_DEAD",
        "JOB_LIST_OLDEST_IN_WAITING",
    ),
    "JOB_COUNT": (
        "JOB_COUNT_IN_LIVE",
        "JOB_COUNT_IN_DONE",
        "JOB_COUNT_IN_DEAD",
        "JOB_COUNT_IN_WAITING",
    ),
    "JOB_COUNT_STATES": (
        "JOB_COUNT_STATES_IN_LIVE",
        "JOB_COUNT_STATES_IN_DONE",
        "JOB_COUNT_STATES_IN_DEAD",
        "JOB_COUNT_STATES_IN_WAITING",
    ),
}
"""Each statement read by partition, and its text reading one partition instead of
``skiplock_jobs`` (its own filters, ``state = $1`` among them, kept), named in
``queries/reads.sql``: on ``skiplock_jobs_live``, ``_done``, ``_dead``, ``_waiting``."""

PARTITION_OF = {
    "pending": 0,
    "running": 0,
    "succeeded": 1,
    "cancelled": 1,
    "dead": 2,
    "waiting": 3,
}
"""The partition each state's rows are in (the place of its statement in ``IN_PARTITION``)."""


class Variants(NamedTuple):
    """One schema's variants, each keyed by the text of the statement it is a variant of (the
    statement the backend's rooms hold, ``Statements.for_schema``)."""

    parts: dict[str, tuple[str, str]]
    in_partition: dict[str, tuple[str, ...]]
    live_lock: str
    lock_timeout: str


@functools.lru_cache(maxsize=64)
def variants(schema: str) -> Variants:
    """The read variants of ``schema``'s statements, filled in once."""

    def base(name: str) -> str:
        return with_schema(statements.QUERIES[name], schema)

    def named(name: str) -> str:
        return with_schema(QUERIES[name], schema)

    return Variants(
        {base(name): (named(live), named(rest)) for name, (live, rest) in PARTS.items()},
        {base(name): tuple(map(named, each)) for name, each in IN_PARTITION.items()},
        fill_names(QUERIES["READ_LIVE_LOCK"], schema, ms=READ_LOCK_TIMEOUT_MS),
        fill_names(QUERIES["LOCK_TIMEOUT"], schema, ms=READ_LOCK_TIMEOUT_MS),
    )


def parts(statement: str, schema: str) -> tuple[str, str]:
    """``statement``'s live part and the rest (``PARTS``)."""
    try:
        return variants(schema).parts[statement]
    except KeyError:
        raise AssertionError("a statement read in parts has its parts in PARTS") from None


def in_partition(statement: str, schema: str, state: str) -> str:
    """``statement`` reading ``state``'s partition alone (``IN_PARTITION``)."""
    try:
        return variants(schema).in_partition[statement][PARTITION_OF[state]]
    except KeyError:
        raise AssertionError("a statement read by partition has its own in IN_PARTITION") from None


A = TypeVar("A")
B = TypeVar("B")


EXPORT = QUERIES["EXPORT"]
"""The live part's first statement after its lock: the reading's instant (the pinned $1, else
the database's now, the transaction's start) and its snapshot, for the rest to import."""


IMPORT_SNAPSHOT = QUERIES["IMPORT_SNAPSHOT"]
"""The rest's first statement: the live part's snapshot, then the read lock timeout."""

SNAPSHOT_ID = re.compile(r"[0-9A-Fa-f]+(?:-[0-9A-Fa-f]+)+")
"""What ``pg_export_snapshot()`` gives: groups of hex digits joined by dashes
(``00000003-0000001B-1``)."""


def _import(snapshot: str) -> str:
    """``IMPORT_SNAPSHOT`` for ``snapshot``, checked to be a snapshot's id before it is quoted
    into the statement (``SET TRANSACTION SNAPSHOT`` takes no parameter)."""
    if not SNAPSHOT_ID.fullmatch(snapshot):
        raise ValueError(f"not a snapshot's id: {snapshot!r}")
    return fill(IMPORT_SNAPSHOT, snapshot=quote_literal(snapshot), ms=str(READ_LOCK_TIMEOUT_MS))


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
            await conn.execute(variants(self.schema).lock_timeout)
            return await getattr(conn, how)(statement, *args)

    async def by_state(self, how: str, statement: str, state: str, *args: Any) -> Any:
        """``statement`` on ``state``'s partition alone (``one``)."""
        return await self.one(how, in_partition(statement, self.schema, state), *args)

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
                await live_conn.execute(variants(self.schema).live_lock)
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

    live_part, rest_part = parts(statement, reads.schema)

    async def live(conn: Any, _at: Any) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await conn.fetch(live_part, *args)
        return rows

    async def rest(conn: Any, _at: Any) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await conn.fetch(rest_part, *args)
        return rows

    _, live_rows, rest_rows = await reads.split(live, rest)
    return live_rows, rest_rows
