"""The pieces PostgreSQL operations compose: statement arguments as parallel arrays, insert
results mapped back to input order, the shared flows' answers, filters.

The rooms of the backend (``claim.py``, ``completion.py``, ...) own the pools' use and the
operations; these are plain functions and one class they share.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from ..._job import ClaimedJob, Completion, JobFilter, NewJob
from ..._transitions import transition
from ...errors import QueueFull
from .. import flows
from ..claim_rules import AGING_LEVELS, KeyCursors, keys_to_visit
from ..job_rows import claimed_jobs, filter_values, in_claim_order
from ..params import ClaimParams
from ..protocol import MAX_ERRORS_KEPT
from ..unique_keys import key_id, map_inserted, unique_scope
from .statements import Statements
from .storage.generations import LONG_SEGMENT


@functools.lru_cache(maxsize=256)
def to_psycopg(statement: str) -> str:
    """``$1`` placeholders to psycopg's ``%(p1)s`` (a parameter may appear more than once);
    cached: the same text every time is also what lets psycopg reuse a prepared statement."""
    return re.sub(r"\$(\d+)", r"%(p\1)s", statement.replace("%", "%%"))


COPY_MIN_ROWS = 200
"""Bulk enqueues this large (and without unique keys) go by COPY; smaller ones by one INSERT,
which is a single round trip where COPY takes four. A workflow's jobs, waits and edges too."""


def insert_params(jobs: Sequence[NewJob], channel: str, now: datetime | None) -> list[Any]:
    """The batch as parallel arrays, in JOB_INSERT_MANY's parameter order."""
    return [
        [j.task for j in jobs],
        [j.queue for j in jobs],
        [j.args_json for j in jobs],
        [j.kwargs_json for j in jobs],
        [j.priority for j in jobs],
        [j.max_attempts for j in jobs],
        [j.run_at.timestamp() if j.run_at else None for j in jobs],
        [j.run_after_s for j in jobs],
        [j.timeout for j in jobs],
        [j.correlation_id for j in jobs],
        channel,
        now,
        [j.lease_s for j in jobs],
        [j.unique_key for j in jobs],
        [j.unique_succeeded for j in jobs],
        [j.trace_context for j in jobs],
        [j.payload_version for j in jobs],
        _unless_all([j.concurrency_key for j in jobs], None),
        _unless_all([j.key_limit for j in jobs], None),
        _unless_all([j.key_order for j in jobs], None),
        _unless_all([j.unique_for_s for j in jobs], None),
        _unless_all([j.key_weight for j in jobs], None),
        _unless_all([unique_scope(j) for j in jobs], None),
        _unless_all([j.lane for j in jobs], "default"),
    ]


def completion_params(
    completions: Sequence[Completion],
    now: datetime | None,
    channel: str,
    segments: list[int] | None = None,
) -> list[Any]:
    """A batch of outcomes as parallel arrays, each row's columns as its transition says, in
    JOB_SET_STATE_IF_RUNNING_MANY's order (``now`` None: the database's now()); the finished
    ids are announced on ``channel``; the rows are looked for in ``segments`` (None: those
    they were claimed from, ``segments_of``)."""
    changes = [transition(c.disposition, c.delay_s) for c in completions]
    return [
        [c.job_id for c in completions],
        [c.lease_token for c in completions],
        [t.state.value for t in changes],
        _unless_all([t.attempt_delta for t in changes], 0),
        _unless_all([t.run_after_s for t in changes], None),
        _unless_all([t.finished for t in changes], True),
        _unless_all(
            [json.dumps(c.error) if c.error is not None else None for c in completions], None
        ),
        now,
        MAX_ERRORS_KEPT,
        _unless_all([c.result_json for c in completions], None),
        channel,
        _unless_all([c.progress_json for c in completions], None),
        [c.run_s for c in completions],
        segments_of(completions) if segments is None else segments,
    ]


def segments_of(completions: Sequence[Completion]) -> list[int] | None:
    """The live segments a batch's rows were claimed from; None (any) where one is unknown.
    Read per batch, the planner leaves the other segments out: every id would otherwise be
    looked up in all four (measured 4.7 ms against 3.4 ms a batch of 500). A job a rotation
    moved to the long segment while it ran is not found there: ``PostgresBackend`` writes
    what the batch missed once more, in the long segment (``LONG_SEGMENTS``)."""
    found = set()
    for c in completions:
        if c.segment is None:
            return None
        found.add(c.segment)
    return sorted(found)


LONG_SEGMENTS = [LONG_SEGMENT]
"""Where a batch's missed rows are looked for the second time."""


def heartbeat_segments(claimed: frozenset[int] | None) -> list[int] | None:
    """Where a heartbeat looks for its rows: the segments they were claimed from and the long
    one, in a single pass (a beat's jobs are the ones that run long, which a rotation moves
    there while they run); None (every segment) when a job's segment is not known."""
    if claimed is None:
        return None
    return sorted(claimed | {LONG_SEGMENT})


def _unless_all(column: list[Any], default: object) -> list[Any] | None:
    """The column, or None (one SQL NULL the statement reads as ``default`` in every row)
    when every row holds the default: asyncpg checks each element of an array it encodes,
    about 0.2 us apiece, and a batch of successes leaves five of its ten columns at theirs
    (benchmarks/HISTORY.md, "Step two, made up")."""
    return None if column.count(default) == len(column) else column


CLAIMED_COLUMNS = tuple(
    field.name.removesuffix("_json") for field in dataclasses.fields(ClaimedJob)
)
"""ClaimedJob's fields in order, by the names a claim's RETURNING gives them (``args`` for
``args_json``)."""


def claimed_in_order(rows: Sequence[asyncpg.Record]) -> list[ClaimedJob]:
    """A claim's rows as jobs to start. A record is a tuple underneath: when its columns
    are ClaimedJob's fields in order (checked once a batch), each job is built from the
    record's values by position, without sixteen lookups by name (0.6 us a job)."""
    if rows and tuple(rows[0].keys()) == CLAIMED_COLUMNS and len(rows[-1]) == _WIDTH:
        return in_claim_order([ClaimedJob(*row) for row in rows])
    if rows and tuple(rows[0].keys()) == _POINTED:  # a named claim's (storage/sight.py)
        return in_claim_order([ClaimedJob(*row[:_WIDTH]) for row in rows])
    return claimed_jobs(rows, _same)


def keyed_in_order(rows: Sequence[asyncpg.Record]) -> list[ClaimedJob]:
    """A keyed claim's rows as jobs to start, in the order the claim took them (its rows
    come sorted by it: priority, then the key's turn, then age)."""
    return claimed_jobs(rows, _same, as_listed=True)


_WIDTH = len(CLAIMED_COLUMNS)
"""A limited queue's claim lists its ordinary rows, then its keyed ones (wider: their keys)."""

_POINTED = (*CLAIMED_COLUMNS, "pointer")
"""A named claim's columns: ClaimedJob's, then the pointer it ran with (``CLAIM_WITH_POINTER``)."""


def keyed_claimed(rows: Sequence[asyncpg.Record]) -> tuple[list[Any], tuple[str, str] | None]:
    """A keyed claim's rows (JOB_GET_AVAILABLE_KEYED) without its row of NULLs, and where the
    next claim's walk starts (the claim decides: keys.py)."""
    taken = [r for r in rows if r["id"] is not None]
    queue, key = (rows[0]["next_queue"], rows[0]["next_key"]) if rows else (None, None)
    return taken, None if queue is None or key is None else (str(queue), str(key))


def _same(value: datetime) -> datetime:
    return value


def missing_keys(jobs: Sequence[NewJob], rows: Sequence[Any]) -> list[list[str]]:
    """Unique keys of the batch that the insert did not create (a live job holds them), as
    JOB_LIVE_BY_UNIQUE_KEY's arguments: the keys, and their key spaces; [] when none."""
    if any(row[0] == "full" for row in rows):
        return []
    created = {(row[2], row[3]) for row in rows if row[2] is not None}
    wanted = {key_id(j) for j in jobs} - created - {None}
    missing = sorted(key for key in wanted if key is not None)
    return [[key for key, _ in missing], [scope for _, scope in missing]] if missing else []


def finish_insert(
    jobs: Sequence[NewJob],
    rows: Sequence[Any],
    live: Sequence[Any],
    held: list[int] | None = None,
) -> list[int]:
    full = [row[2] for row in rows if row[0] == "full"]
    if full:
        raise QueueFull(
            f"queue {', '.join(map(repr, full))} is at its max_depth: nothing was enqueued"
        )
    inserted = [(row[1], None if row[2] is None else (row[2], row[3])) for row in rows]
    holders = {(key, scope): job_id for job_id, key, scope in live}
    return map_inserted(jobs, inserted, holders, held)


def replace_step(
    step: object, statements: Statements, now: datetime | None, channel: str
) -> tuple[str, list[Any], Callable[[Sequence[Any]], Any]]:
    """A step of ``flows.replace_held`` as (statement, arguments, how its rows answer it),
    for whichever driver runs it."""
    if isinstance(step, flows.InsertUnique):
        return statements.JOB_INSERT_MANY, insert_params([step.job], channel, now), _inserted
    if isinstance(step, flows.HolderOf):
        return statements.JOB_HOLDER_OF, [step.key, now, step.scope], _first_or_none
    if isinstance(step, flows.ReplacePending | flows.ReplaceKey):
        j = step.job
        holder = step.holder if isinstance(step, flows.ReplacePending) else None
        run_at = j.run_at.timestamp() if j.run_at else None
        args: list[Any] = [holder, j.unique_key, j.args_json, j.kwargs_json, run_at]
        args += [j.run_after_s, now, j.payload_version, channel, unique_scope(j), j.task]
        read = bool if holder is not None else _first_or_none
        return statements.JOB_REPLACE_PENDING, args, read
    if isinstance(step, flows.ReleaseRunning):
        j = step.job
        args = [step.holder, j.unique_key, unique_scope(j), j.task]
        return statements.JOB_RELEASE_RUNNING_KEY, args, bool
    raise TypeError(f"no PostgreSQL answer to {step!r}")


def _inserted(rows: Sequence[Any]) -> int | None:
    """InsertUnique's answer: the new id; None when a job holds the key."""
    if rows and rows[0][0] == "full":
        raise QueueFull(f"queue {rows[0][2]!r} is at its max_depth: nothing was enqueued")
    return int(rows[0][1]) if rows else None


def _first_or_none(rows: Sequence[Any]) -> int | None:
    return int(rows[0][0]) if rows else None


RACE_LOST = "40001"
"""SQLSTATE of a row another transaction moved to another partition (a finish, a person's
cancel) while a replace step waited for it: the step did nothing, and the flow looks again."""


@contextlib.contextmanager
def unless_race_lost() -> Iterator[None]:
    """Swallow RACE_LOST from a replace step run in a savepoint (asyncpg's and psycopg's
    errors both carry ``sqlstate``); the step's rows stay as they were before it (none)."""
    try:
        yield
    except Exception as exc:
        if getattr(exc, "sqlstate", None) != RACE_LOST:
            raise


def psycopg_step(
    step: object, statements: Statements, now: datetime | None, channel: str
) -> tuple[str, dict[str, Any], Callable[[Sequence[Any]], Any]]:
    """``replace_step`` in psycopg's placeholders and named arguments."""
    statement, args, read = replace_step(step, statements, now, channel)
    return to_psycopg(statement), {f"p{i}": v for i, v in enumerate(args, 1)}, read


async def claim_keyed(
    conn: Any,
    statements: Statements,
    claim_args: Callable[[ClaimParams, str | None], list[Any]],
    params: ClaimParams,
    limited: bool,
    cursors: KeyCursors,
) -> list[Any]:
    """The keyed claim (JOB_GET_AVAILABLE_KEYED) on ``conn``: up to ``params.limit`` jobs,
    each key within its limit, the walk started where this process's last one stopped."""
    args = claim_args(params, None)
    where = (None if args[0] is None else tuple(args[0]), limited, params.lane)
    after = cursors.get(where) or (None, None)
    statement = statements.JOB_GET_AVAILABLE_KEYED
    rows = await conn.fetch(
        statement, *args, limited, *after, keys_to_visit(params.limit), params.lane
    )
    taken, cursors[where] = keyed_claimed(rows)
    return taken


class Answers:
    """A flow's steps (flows.py) answered on one connection, inside its open transaction.
    The transaction's now() is one instant, so a claim's and a lock's clocks agree."""

    def __init__(
        self,
        conn: Any,
        statements: Statements,
        claim_args: Callable[[ClaimParams, str | None], list[Any]],
        now: datetime | None,
        channel: str,
        key_cursors: KeyCursors,
    ) -> None:
        self.conn, self.sql, self.claim_args = conn, statements, claim_args
        self.now, self.channel, self.key_cursors = now, channel, key_cursors

    async def __call__(self, step: object) -> Any:
        return await self.answer(step)

    @functools.singledispatchmethod
    async def answer(self, step: object) -> Any:
        raise TypeError(f"no PostgreSQL answer to {step!r}")

    @answer.register
    async def _(self, step: flows.LockQueue) -> flows.QueueLimits | None:
        row = await self.conn.fetchrow(self.sql.QUEUE_LOCK, step.queue, self.now)
        if row is None:
            return None
        return flows.QueueLimits(
            row["max_running"],
            row["rate_per_s"],
            row["paused"],
            row["recent_starts"],
            row["now"],
            row["aging_s"],
        )

    @answer.register
    async def _(self, step: flows.CountRunning) -> int:
        return int(await self.conn.fetchval(self.sql.QUEUE_RUNNING, step.queue))

    @answer.register
    async def _(self, step: flows.ClaimFromQueue) -> list[Any]:
        args = self.claim_args(step.params, step.queue)
        if step.aging_s is not None:  # $1 the queue itself; $8 its step, $9 the levels read
            aged = (step.queue, *args[1:], step.aging_s, AGING_LEVELS, step.params.lane)
            return list(await self.conn.fetch(self.sql.JOB_GET_AVAILABLE_AGED, *aged))
        statement = self.sql.JOB_GET_AVAILABLE_IN_QUEUES
        rows: list[Any] = await self.conn.fetch(statement, *args, True, step.params.lane)
        return rows

    @answer.register
    async def _(self, step: flows.ClaimKeyedFromQueue) -> list[Any]:
        params = dataclasses.replace(step.params, queues=(step.queue,))
        return await claim_keyed(
            self.conn, self.sql, self.claim_args, params, True, self.key_cursors
        )

    @answer.register
    async def _(self, step: flows.SetStarts) -> None:
        await self.conn.execute(self.sql.QUEUE_STARTS_SET, step.queue, step.starts)

    @answer.register
    async def _(self, step: flows.InsertSlot) -> bool:
        return bool(await self.conn.fetch(self.sql.CRON_SLOT_INSERT, step.schedule, step.slot))

    @answer.register
    async def _(self, step: flows.PreviousRunLive) -> bool:
        return bool(await self.conn.fetchval(self.sql.CRON_PREVIOUS_RUN_LIVE, step.schedule))

    @answer.register
    async def _(self, step: flows.InsertJob) -> int:
        params = insert_params([step.job], self.channel, self.now)
        return int((await self.conn.fetch(self.sql.JOB_INSERT_MANY, *params))[0]["id"])

    @answer.register
    async def _(self, step: flows.SetSlotOutcome) -> None:
        args = (step.schedule, step.slot, step.job_id, step.skipped)
        await self.conn.execute(self.sql.CRON_SLOT_SET_OUTCOME, *args)


def filter_params(where: JobFilter) -> list[Any]:
    """A filter in the order the filtered statements take it ($2..$7)."""
    return list(filter_values(where).values())
