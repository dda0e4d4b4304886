"""The live partition's generations on PostgreSQL: new jobs go to the newest segment, and an old
one leaves the claims' path without waiting for any reader.

Why (docs/design.md, "Storage: segments no reader can hold"): a session holding an old
snapshot keeps vacuum from removing the versions that died after it began, so the claim
indexes fill with dead entries every claim walks past. Until migration 27 a ring of three
segments was truncated in turn, and a truncate needs ACCESS EXCLUSIVE: a report in
``REPEATABLE READ``, a Grafana panel or a ``pg_dump`` holding ACCESS SHARE on the job table
kept every segment, and claims slowed down for as long as it read.

Now each segment is a generation, numbered (``segment`` values GEN_FIRST to GEN_LAST, reused in
a cycle once a number's tables are gone), and leaves with ``DETACH PARTITION ... CONCURRENTLY``:

- **Advance.** When the segment taking new jobs has grown to ``min_bytes``, the next
  generation's tables are made and attached (ATTACH takes SHARE UPDATE EXCLUSIVE on the live
  partition, which no reader's or writer's lock conflicts with), then the pointer moves to it:
  the sequence ``skiplock_live_segment``, whose last value is the job table's default for
  ``segment`` (``SEGMENT_NOW``: read without MVCC, so no version piles up behind a reader, and
  moved only once the tables it names are committed, so an insert always finds its segment).
- **Retire.** A generation older than the one before the newest has its live jobs moved to
  the long segment (as the ring's were), then its table is detached concurrently. The first
  phase of a detach makes every new snapshot leave the table out, claims included; the second
  waits for the sessions that locked it before: the rotation waits for them for LIVE_WAIT_S
  only, and an interrupted detach stays pending, out of every new query's sight, to be
  finished (``FINALIZE``) on a later turn once its readers are gone.
- **Drop.** A finished table is dropped (after moving back any job a long statement wrote to it
  after the move: it was out of the claims' sight meanwhile, never lost).

PostgreSQL allows one pending detach per partitioned table, and a reader can hold a detach for
hours: so each generation's table sits under a partitioned table of its own
(``skiplock_jobs_live_sN_p``, holding only it), and any number of generations can wait for
their readers at once. The empty wrappers leave the same way, one at a time, once their readers
are gone. The catalog churn: two tables made and dropped a generation, and a generation is
made only when the newest one has grown to ``min_bytes`` (1 MiB in a worker, about 4,000 jobs),
so an idle queue makes none.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from ...params import Rotation
from ...sql_files import Filler, fill, fill_names
from ..errors import moved
from . import QUERIES
from .generations import (
    GEN_FIRST,
    GEN_LAST,
    LONG_SEGMENT,
    generation_sql,
    segment_name,
    wrapper_name,
)

ROTATE_LOCK = QUERIES["ROTATE_LOCK"]

LIVE_WAIT_S = 0.05
"""How long a detach (or its finish) waits for the sessions that locked the table before it:
a claim's or a completion's lock lasts milliseconds; a reader's lasts until its transaction
ends, and the detach is left pending for a later turn rather than waited out."""

MOST_WAITING = 128
"""How many retired generations may wait for their readers (or their turn to leave the live
partition) before the newest stops being replaced: each one left attached is an empty wrapper
that a plan of the job table naming no segment expands (measured: a planning of 0.18 ms with
none, 0.5 ms with 10, 1.4 ms with 30, 4.3 ms with 64; the ordinary claims, the outcomes and
the heartbeat name theirs and skip them: sight.py), so a reader holding on for hours stops
the rotation here (the newest generation then grows, and vacuum clears what it can, as before
the generations)."""

WAITING_DOUBLES = 64
"""Every this many generations waiting, the size the newest must reach before the next is made
doubles: a read of hours makes fewer, larger generations before MOST_WAITING. Not sooner: the
claims walk the dead versions of the newest two, and a larger newest holds more (W9 at 5,798
jobs/s, 2026-12-07: 206,000 dead at most doubling every 16, 57,000 never doubling, 77
generations waiting; at 1,000 jobs/s, 36,548 against 16,593, 43 waiting; docs/benchmarks.md),
and since the claims name their segments a waiting wrapper costs them nothing."""

FINISH_WAIT_MOST_S = 0.8
"""The longest a ``FINALIZE`` waits, reached by doubling LIVE_WAIT_S each time the same table's
finish came up short. A finish waits for every transaction in the database older than it (not
only the job table's readers), so in a database where some transaction is always a few hundred
milliseconds old, 50 ms would never do; below PostgreSQL's default ``deadlock_timeout`` (1 s),
so a finish that a reader of an old snapshot waits on (it holds the table's ACCESS EXCLUSIVE
lock while it waits) gives up before the deadlock detector would pick a victim."""

_finish_tries: dict[tuple[str, int], int] = {}
"""How many times each pending table's finish came up short, by (schema, generation)."""

CATCH_UP_S = 0.5
"""How long one turn goes on finishing and dropping the generations earlier turns left, once
it has started: when a long reader ends, the dozens it held leave in a turn or two. One a turn
had kept the claims' p99 at two to seven times the clean phase's for the 20 s they took to
leave (W9's recovery, docs/benchmarks.md): each detach makes every session plan its
statements on the job table again."""

DROP_LOCK_TIMEOUT_MS = 10
"""How long the drop of a detached table waits for its lock (only a session that named the
table itself can hold one)."""

_NAME = re.compile(r"^skiplock_jobs_live_s(\d+)(_p)?$")

TABLES = QUERIES["TABLES"]
"""Every generation's table and wrapper: what each is attached to, whether a detach of it is
pending, and the table's size."""


def next_segment(current: int) -> int:
    """The number after ``current`` in the cycle."""
    return GEN_FIRST if current >= GEN_LAST else current + 1


def previous_segment(current: int) -> int:
    """The number before ``current`` in the cycle."""
    return GEN_LAST if current <= GEN_FIRST else current - 1


POINTER_NOW = QUERIES["POINTER_NOW"]
"""The generation new jobs go to: the pointer sequence's last value (``{s}``: the schema)."""


def pointer_sql(s: str) -> str:
    """``POINTER_NOW`` of a schema (``s``: the schema, quoted)."""
    return fill(POINTER_NOW, s=s)


@dataclass
class Generation:
    """One generation's tables as the catalog has them now."""

    segment: int
    wrapper: str | None = None  # what the wrapper is attached to (None: detached or gone)
    wrapper_made: bool = False
    wrapper_pending: bool = False
    table_made: bool = False
    table_parent: str | None = None  # the wrapper while attached
    table_pending: bool = False
    table_bytes: int = 0

    @property
    def in_sight(self) -> bool:
        """Its table is attached and not pending: new queries read it."""
        return self.table_parent is not None and not self.table_pending


@dataclass
class _Turn:
    """What one rotation did, gathered as it goes."""

    segment: int
    moved: int = 0
    advanced: int | None = None
    detached: list[int] = field(default_factory=list)
    dropped: int = 0
    held: bool = False

    def result(self, schema: str, gens: dict[int, Generation]) -> Rotation:
        pending = sorted(g.segment for g in gens.values() if g.table_pending or g.wrapper_pending)
        return Rotation(
            self.detached[0] if self.detached else self.segment,
            self.moved,
            detached=bool(self.detached),
            held=self.held,
            advanced=self.advanced,
            dropped=self.dropped,
            pending=len(pending),
            held_on=tuple(
                f'"{schema}".{segment_name(n) if gens[n].table_pending else wrapper_name(n)}'
                for n in pending
            ),
        )


async def generations(conn: Any, schema: str) -> dict[int, Generation]:
    """The catalog's generations by number."""
    gens: dict[int, Generation] = {}
    for row in await conn.fetch(TABLES, f'"{schema}"'):
        m = _NAME.match(row["relname"])
        if m is None:
            continue
        g = gens.setdefault(int(m[1]), Generation(int(m[1])))
        if m[2]:
            g.wrapper_made, g.wrapper, g.wrapper_pending = True, row["parent"], row["pending"]
        else:
            g.table_made, g.table_parent = True, row["parent"]
            g.table_pending, g.table_bytes = row["pending"], int(row["bytes"])
    return gens


def _free_after(current: int, gens: dict[int, Generation]) -> int | None:
    """The number after ``current`` for the next generation: its own if made and in sight (a
    spare made ahead), else the first whose old tables are gone; None: every number is taken
    (the old ones wait for their readers)."""
    nxt = next_segment(current)
    while nxt in gens and not (gens[nxt].in_sight and gens[nxt].wrapper is not None):
        nxt = next_segment(nxt)
        if nxt == current:
            return None
    return nxt


async def _make(conn: Any, schema: str, segment: int, turn: _Turn) -> bool:
    """Make and attach generation ``segment`` (in the caller's transaction): whether it could
    (the live partition's lock within its short timeout)."""
    await conn.execute(fill_names(QUERIES["LOCK_TIMEOUT"], schema, ms=DROP_LOCK_TIMEOUT_MS))
    try:
        for statement in generation_sql(schema, segment):
            await conn.execute(statement)
    except asyncpg.exceptions.LockNotAvailableError:
        turn.held = True
        return False
    return True


async def _advance(conn: Any, schema: str, turn: _Turn, *, move: bool, urgent: bool) -> None:
    """Keep a spare generation made ahead of the newest, and (``move``) point new jobs at it,
    then make the next spare; under the rotation lock.

    Ahead, because a statement keeps the partitions it first routed to for its whole run: a
    long insert whose rows read the pointer anew (the column's default) would meet a generation
    attached after it began. With a spare made a turn before the pointer moves to it, only a
    statement outliving two advances can. The pointer moves after the commit that made its
    generation (``setval`` is not transactional), so an insert never reads a number whose
    tables it cannot see. ``urgent``: the newest generation's tables are missing, so the
    pointer moves to a spare made now."""
    s = f'"{schema}"'
    async with conn.transaction():
        if not await conn.fetchval(ROTATE_LOCK, schema):
            return
        current = int(await conn.fetchval(pointer_sql(s)))
        if current != turn.segment:
            return  # another session advanced since this one looked
        gens = await generations(conn, schema)
        nxt = _free_after(current, gens)
        if nxt is None:
            turn.held = True
            return
        if nxt not in gens:
            if not await _make(conn, schema, nxt, turn):
                return
            move = urgent  # made now: pointed at on a later turn, unless nothing else can be
    if not move:
        return
    await conn.execute(fill_names(QUERIES["POINTER_MOVE"], schema, segment=nxt))
    turn.advanced = nxt
    async with conn.transaction():
        if not await conn.fetchval(ROTATE_LOCK, schema):
            return
        if int(await conn.fetchval(pointer_sql(s))) != nxt:
            return
        gens = await generations(conn, schema)
        spare = _free_after(nxt, gens)
        if spare is not None and spare not in gens:
            await _make(conn, schema, spare, turn)


async def _retire(conn: Any, schema: str, g: Generation, channel: str, turn: _Turn) -> None:
    """Move generation ``g``'s live jobs aside, then detach its table concurrently."""
    s = f'"{schema}"'
    names: dict[str, Filler] = {
        "table": segment_name(g.segment),
        "wrapper": wrapper_name(g.segment),
        "segment": g.segment,
        "long": LONG_SEGMENT,
    }
    async with conn.transaction():
        if not await conn.fetchval(ROTATE_LOCK, schema):
            return
        if not _retirable(g.segment, int(await conn.fetchval(pointer_sql(s)))):
            return  # the pointer moved since this turn looked: another session's turn
        try:
            row = await conn.fetchrow(
                fill_names(QUERIES["GENERATION_MOVE_ASIDE"], schema, **names), channel
            )
        except asyncpg.exceptions.SerializationError as exc:
            if not moved(exc):
                raise
            turn.held = True  # a worker moved one first: the next look
            return
        turn.moved += int(row["moved"])
    if await conn.fetchval(fill_names(QUERIES["GENERATION_ANY_ROW"], schema, **names)):
        turn.held = True  # a row a worker held while the move passed: the next look
        return
    if await _interruptible(conn, fill_names(QUERIES["GENERATION_DETACH"], schema, **names)):
        turn.detached.append(g.segment)
        return
    state = (await generations(conn, schema)).get(g.segment)
    if state is not None and state.table_pending:
        turn.detached.append(g.segment)  # out of the claims' sight; its readers are waited later


async def _interruptible(conn: Any, statement: str, wait_s: float = LIVE_WAIT_S) -> bool:
    """Run a concurrent detach (or its finish) for at most ``wait_s``: whether it completed.
    Interrupted in its wait for older sessions, a detach stays pending (PostgreSQL's own
    bookkeeping): new queries no longer see the table, and a later FINALIZE completes it."""
    try:
        await conn.execute(statement, timeout=wait_s)
    except TimeoutError:
        return False
    except asyncpg.exceptions.ObjectNotInPrerequisiteStateError:
        return False  # another session's detach of it (or of a sibling wrapper) is pending
    except asyncpg.exceptions.UndefinedTableError:
        return False  # another session finished it first
    except asyncpg.exceptions.InvalidTableDefinitionError:
        return False  # not a partition any more: another session finished it first
    return True


async def _drop(conn: Any, schema: str, name: str, channel: str, turn: _Turn) -> bool:
    """Drop a detached generation table or wrapper, moving back first any live job written to
    the table after its move (a statement that began before the detach): whether it went."""
    table = f'"{schema}".{name}'
    try:
        async with conn.transaction():
            await conn.execute(fill_names(QUERIES["LOCK_TIMEOUT"], schema, ms=DROP_LOCK_TIMEOUT_MS))
            await conn.execute(fill_names(QUERIES["DETACHED_LOCK"], schema, table=name))
            if not name.endswith("_p"):
                names: list[str] = await conn.fetchval(QUERIES["DETACHED_COLUMNS"], table)
                columns: list[str | int] = list(names)
                picked: list[str | int] = [LONG_SEGMENT if n == "segment" else n for n in names]
                back = await conn.fetch(
                    fill_names(
                        QUERIES["DETACHED_MOVE_BACK"],
                        schema,
                        columns=columns,
                        picked=picked,
                        table=name,
                    )
                )
                for queue in sorted({r["queue"] for r in back if r["state"] == "pending"}):
                    await conn.execute(QUERIES["QUEUE_WAKE"], channel, queue)
                turn.moved += len(back)
            await conn.execute(fill_names(QUERIES["DETACHED_DROP"], schema, table=name))
    except asyncpg.exceptions.LockNotAvailableError:
        return False
    except asyncpg.exceptions.UndefinedTableError:
        return False  # another session dropped it first
    turn.dropped += 1
    return True


async def _clear(
    conn: Any, schema: str, gens: dict[int, Generation], channel: str, turn: _Turn
) -> None:
    """Finish what earlier turns left: the pending detaches of tables, oldest first, until
    one is still held; the tables and wrappers detached; then the empty wrappers detached from
    the live partition, the oldest first, until one is still held (one may be pending there at
    a time). All within CATCH_UP_S: once a long reader ends, the generations it held leave in
    a turn or two rather than one a turn."""
    ends = time.monotonic() + CATCH_UP_S
    waiting = [g for g in gens.values() if g.table_pending]
    pending = {(schema, g.segment) for g in waiting} | {
        (schema, -g.segment) for g in gens.values() if g.wrapper_pending
    }
    for key in [k for k in _finish_tries if k[0] == schema and k not in pending]:
        del _finish_tries[key]  # finished by another session: its count goes with it
    for g in sorted(waiting, key=lambda g: -_age(g.segment, turn.segment)):  # the oldest first
        if not await _finish(conn, schema, g) or time.monotonic() >= ends:
            break
    for g in gens.values():
        detached = g.table_made and g.table_parent is None
        if detached and await _drop(conn, schema, segment_name(g.segment), channel, turn):
            g.table_made = False
    live = {turn.segment, previous_segment(turn.segment)}
    empty = [g for g in gens.values() if g.wrapper_made and not g.table_made]
    # the one pending first (no other may start its detach before it is finished), then the
    # oldest first
    for g in sorted(empty, key=lambda g: (not g.wrapper_pending, -_age(g.segment, turn.segment))):
        if g.segment in live:
            continue
        if g.wrapper is None:
            if await _drop(conn, schema, wrapper_name(g.segment), channel, turn):
                g.wrapper_made = False
            continue
        if g.wrapper_pending or not any(x.wrapper_pending for x in gens.values()):
            left = await _leave_live(conn, schema, g, channel, turn)
            if not left or time.monotonic() >= ends:
                return


async def _finish(conn: Any, schema: str, g: Generation) -> bool:
    """Finish generation ``g``'s pending table detach (``FINALIZE``), waiting longer each time
    it came up short: whether it finished."""
    tries = _finish_tries.get((schema, g.segment), 0)
    finish = fill_names(
        QUERIES["GENERATION_DETACH_FINALIZE"],
        schema,
        wrapper=wrapper_name(g.segment),
        table=segment_name(g.segment),
    )
    if not await _interruptible(conn, finish, min(LIVE_WAIT_S * 2**tries, FINISH_WAIT_MOST_S)):
        _finish_tries[(schema, g.segment)] = tries + 1
        return False
    _finish_tries.pop((schema, g.segment), None)
    g.table_parent, g.table_pending = None, False
    return True


async def _leave_live(conn: Any, schema: str, g: Generation, channel: str, turn: _Turn) -> bool:
    """Detach generation ``g``'s empty wrapper from the live partition (or finish its pending
    detach), then drop it: whether it left the live partition."""
    how = "WRAPPER_LEAVE_LIVE_FINALIZE" if g.wrapper_pending else "WRAPPER_LEAVE_LIVE"
    statement = fill_names(QUERIES[how], schema, wrapper=wrapper_name(g.segment))
    key = (schema, -g.segment)  # a wrapper's tries, apart from its table's
    tries = _finish_tries.get(key, 0) if g.wrapper_pending else 0
    if not await _interruptible(conn, statement, min(LIVE_WAIT_S * 2**tries, FINISH_WAIT_MOST_S)):
        _finish_tries[key] = tries + 1
        g.wrapper_pending = True
        return False
    _finish_tries.pop(key, None)
    g.wrapper, g.wrapper_pending = None, False
    if await _drop(conn, schema, wrapper_name(g.segment), channel, turn):
        g.wrapper_made = False
    return True


def _retirable(segment: int, current: int) -> bool:
    """Whether generation ``segment`` is old enough to retire while ``current`` takes the new
    jobs: older than the one before it, and not a spare made ahead (whose number comes after
    ``current`` in the cycle: to the age count, nearly a whole cycle back)."""
    return 2 <= _age(segment, current) <= (GEN_LAST - GEN_FIRST + 1) // 2


def _age(segment: int, current: int) -> int:
    """How many numbers ago ``segment`` was ``current`` (0: it is), through the cycle."""
    return (current - segment) % (GEN_LAST - GEN_FIRST + 1)


async def rotate_live(conn: Any, schema: str, min_bytes: int, channel: str) -> Rotation | None:
    """One turn of the live partition's generations (module docstring): advance when the
    newest has grown to ``min_bytes``, retire the ones older than the one before it, finish
    and drop what earlier turns left. Pending jobs moved wake their queues' workers on
    ``channel``. None: another session is rotating."""
    s = f'"{schema}"'
    current = int(await conn.fetchval(pointer_sql(s)))
    turn = _Turn(current)
    gens = await generations(conn, schema)
    newest = gens.get(current)
    waiting = sum(1 for g in gens.values() if not g.in_sight and g.wrapper is not None)
    size = min_bytes * 2 ** (waiting // WAITING_DOUBLES)
    grown = newest is not None and newest.table_bytes >= size and waiting < MOST_WAITING
    broken = newest is None or not newest.in_sight
    await _advance(conn, schema, turn, move=grown or broken, urgent=broken)
    if turn.advanced is not None:
        turn.segment = turn.advanced
        gens = await generations(conn, schema)
    for g in sorted(gens.values(), key=lambda g: -_age(g.segment, turn.segment)):
        if g.in_sight and _retirable(g.segment, turn.segment):
            await _retire(conn, schema, g, channel, turn)
    await _clear(conn, schema, await generations(conn, schema), channel, turn)
    return turn.result(schema, await generations(conn, schema))
