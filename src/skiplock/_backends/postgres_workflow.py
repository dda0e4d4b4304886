"""PostgreSQL's answers to the workflow flows (``workflow_flows.py``), on an asyncpg or a
psycopg (async) connection, and its one-statement workflow reads and writes."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any, TypeVar

import asyncpg

from .._job import NewJob
from .._payload import DEFAULT_MAX_PAYLOAD_BYTES
from . import workflow_flows as wf
from .params import JobInsertManyParams
from .postgres_ops import COPY_MIN_ROWS, to_psycopg
from .postgres_workflow_sql import WorkflowStatements

T = TypeVar("T")

CopyJobs = Callable[[Any, list[NewJob], Sequence[bool]], Awaitable[list[int]]]
"""COPY a plan's jobs on a connection (those flagged written as waiting): their ids."""

Fetch = Callable[[str, Sequence[Any]], Awaitable[list[Sequence[Any]]]]
"""Run one statement with positional arguments, returning its rows as sequences."""


def fetcher(conn: Any, sync: bool = False) -> Fetch:
    """``Fetch`` for an asyncpg connection, or a psycopg one (the caller's; ``sync``: its
    synchronous connection, whose coroutines never suspend: ``run_now`` runs them)."""
    if sync:

        async def fetch_psycopg_sync(statement: str, args: Sequence[Any]) -> list[Sequence[Any]]:
            named = {f"p{i}": v for i, v in enumerate(args, 1)}
            cursor = conn.execute(to_psycopg(statement), named)
            if cursor.description is None:
                return []
            return [tuple(r) for r in cursor.fetchall()]

        return fetch_psycopg_sync

    if isinstance(conn, asyncpg.Connection | asyncpg.pool.PoolConnectionProxy):

        async def fetch_asyncpg(statement: str, args: Sequence[Any]) -> list[Sequence[Any]]:
            return [tuple(r) for r in await conn.fetch(statement, *args)]

        return fetch_asyncpg

    async def fetch_psycopg(statement: str, args: Sequence[Any]) -> list[Sequence[Any]]:
        named = {f"p{i}": v for i, v in enumerate(args, 1)}
        cursor = await conn.execute(to_psycopg(statement), named)
        if cursor.description is None:
            return []
        return [tuple(r) for r in await cursor.fetchall()]

    return fetch_psycopg


def run_now(coroutine: Coroutine[Any, Any, T]) -> T:
    """The value of a coroutine that never suspends (an answer on a synchronous psycopg
    connection: its every statement a plain call), run here, without a loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        value: T = done.value
        return value
    coroutine.close()
    raise RuntimeError("an answer on a synchronous connection waited on the event loop")


class Answers:
    """The workflow flows' steps on one connection, inside the transaction the caller holds."""

    def __init__(
        self,
        conn: Any,
        sql: WorkflowStatements,
        channel: str,
        now: datetime | None,
        insert: Callable[[JobInsertManyParams], Awaitable[list[int]]],
        schema: str = "public",
        copy_jobs: CopyJobs | None = None,
        sync: bool = False,
        bound: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self.conn = conn
        self.fetch = fetcher(conn, sync)
        self.sql, self.channel, self.now, self.insert = sql, channel, now, insert
        self.schema, self.copy_jobs = schema, copy_jobs
        self.bound = bound
        """The most bytes the list of a child's parents' results may take (``Ready``)."""
        self.copies = isinstance(conn, asyncpg.Connection | asyncpg.pool.PoolConnectionProxy)
        """Large inserts go by COPY (asyncpg's; a psycopg connection takes the INSERTs)."""
        self.woken: set[str] = set()
        """The queues the steps made jobs pending in."""

    async def _pending(self, statement: str, args: list[Any]) -> list[int]:
        """A statement that makes jobs pending, returning (id, queue) rows: the ids."""
        rows = await self.fetch(statement, args)
        self.woken.update(r[1] for r in rows)
        return [r[0] for r in rows]

    async def __call__(self, step: object) -> Any:
        return await self.answer(step)

    @functools.singledispatchmethod
    async def answer(self, step: object) -> Any:
        raise TypeError(f"no PostgreSQL answer to {step!r}")

    @answer.register
    async def _(self, step: wf.FindMissing) -> list[int]:
        return [r[0] for r in await self.fetch(self.sql.JOBS_MISSING, [list(step.ids)])]

    @answer.register
    async def _(self, step: wf.InsertJobs) -> list[int]:
        jobs = list(step.jobs)
        plain = not any(j.unique_key or j.concurrency_key for j in jobs)
        if self.copies and plain and len(jobs) >= COPY_MIN_ROWS and self.copy_jobs is not None:
            return await self.copy_jobs(self.conn, jobs, step.waiting)
        ids = await self.insert(JobInsertManyParams(jobs, self.conn))
        waiting = [i for i, w in zip(ids, step.waiting, strict=True) if w]
        if waiting:  # inserted in this transaction: no worker saw them pending
            await self.fetch(self.sql.JOBS_TO_WAITING, [waiting])
        return ids

    async def _copy(self, table: str, columns: list[str], rows: Sequence[tuple[Any, ...]]) -> None:
        await self.conn.copy_records_to_table(
            table, schema_name=self.schema, columns=columns, records=rows
        )

    @answer.register
    async def _(self, step: wf.InsertWaits) -> None:
        if self.copies and len(step.rows) >= COPY_MIN_ROWS:
            names = ["job_id", "parents_left", "pass_results", "batch_id"]
            return await self._copy("skiplock_waits", names, step.rows)
        columns = [list(c) for c in zip(*step.rows, strict=True)]
        await self.fetch(self.sql.WAITS_INSERT, columns)
        return None

    @answer.register
    async def _(self, step: wf.AddParents) -> None:
        columns = [list(c) for c in zip(*step.rows, strict=True)]
        await self.fetch(self.sql.WAITS_ADD, columns)

    @answer.register
    async def _(self, step: wf.InsertEdges) -> None:
        if self.copies and len(step.rows) >= COPY_MIN_ROWS:
            # COPY writes 10,000 edges in a third of the INSERT's time; it knows no ON
            # CONFLICT, so an edge given twice is written once
            first: dict[tuple[int, int], tuple[int, int, int, str]] = {}
            for row in step.rows:
                first.setdefault((row[0], row[1]), row)
            names = ["child_id", "parent_id", "position", "on_failure"]
            return await self._copy("skiplock_deps", names, list(first.values()))
        columns = [list(c) for c in zip(*step.rows, strict=True)]
        await self.fetch(self.sql.DEPS_INSERT, columns)
        return None

    @answer.register
    async def _(self, step: wf.InsertBatch) -> int:
        rows = await self.fetch(self.sql.BATCH_INSERT, [])
        return int(rows[0][0])

    @answer.register
    async def _(self, step: wf.SetCallbacks) -> None:
        args = [step.batch_id, step.on_success, step.on_complete]
        await self.fetch(self.sql.BATCH_SET_CALLBACKS, args)

    @answer.register
    async def _(self, step: wf.LockBatch) -> tuple[bool, int | None, int | None] | None:
        rows = await self.fetch(self.sql.BATCH_GET_LOCKED, [step.batch_id])
        return (bool(rows[0][0]), rows[0][1], rows[0][2]) if rows else None

    @answer.register
    async def _(self, step: wf.CloseBatch) -> tuple[int | None, int | None] | None:
        rows = await self.fetch(self.sql.BATCH_CLOSE, [step.batch_id])
        return (rows[0][0], rows[0][1]) if rows else None

    @answer.register
    async def _(self, step: wf.AbortBatch) -> tuple[int | None, int | None] | None:
        rows = await self.fetch(self.sql.BATCH_ABORT, [step.batch_id, self.now])
        return (rows[0][0], rows[0][1]) if rows else None

    @answer.register
    async def _(self, step: wf.CancelMembers) -> list[int]:
        rows = await self.fetch(self.sql.MEMBERS_CANCEL, [step.batch_id, step.error, self.now])
        ids = [r[0] for r in rows]
        if ids:
            await self.fetch(self.sql.WAITS_DROP, [ids])
        return ids

    @answer.register
    async def _(self, step: wf.AncestorsMeet) -> bool:
        rows = await self.fetch(self.sql.ANCESTORS_MEET, [list(step.starts), list(step.targets)])
        return bool(rows[0][0])

    @answer.register
    async def _(self, step: wf.InsertMembers) -> None:
        await self.fetch(self.sql.BATCH_MEMBERS_INSERT, [step.batch_id, list(step.ids)])

    @answer.register
    async def _(self, step: wf.ResolveEdges) -> list[tuple[int, int, str, str]]:
        rows = await self.fetch(self.sql.DEPS_RESOLVE, [list(step.parents)])
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    @answer.register
    async def _(self, step: wf.Decrement) -> list[int]:
        args = [list(step.counts), list(step.counts.values())]
        return [r[0] for r in await self.fetch(self.sql.WAITS_DECREMENT, args) if r[1] == 0]

    @answer.register
    async def _(self, step: wf.CancelChildren) -> list[int]:
        args = [list(step.errors), list(step.errors.values()), self.now]
        return [r[0] for r in await self.fetch(self.sql.CHILDREN_CANCEL, args)]

    @answer.register
    async def _(self, step: wf.Ready) -> tuple[list[int], list[int]]:
        args = [sorted(step.ids), self.channel, self.now, self.bound]
        rows = await self.fetch(self.sql.CHILDREN_READY, args)
        self.woken.update(r[1] for r in rows if not r[2])
        return [r[0] for r in rows if not r[2]], [r[0] for r in rows if r[2]]

    @answer.register
    async def _(self, step: wf.EdgesAround) -> list[tuple[int, int]]:
        rows = await self.fetch(self.sql.GRAPH_EDGES, [list(step.ids)])
        return [(r[0], r[1]) for r in rows]

    @answer.register
    async def _(self, step: wf.GraphNodes) -> list[tuple[int, str, str]]:
        rows = await self.fetch(self.sql.GRAPH_NODES, [list(step.ids)])
        return [(r[0], r[1], r[2]) for r in rows]

    @answer.register
    async def _(self, step: wf.OpenParents) -> list[int]:
        return [r[0] for r in await self.fetch(self.sql.OPEN_PARENTS, [step.most])]

    @answer.register
    async def _(self, step: wf.StrandedWaits) -> list[int]:
        return [r[0] for r in await self.fetch(self.sql.STRANDED_WAITS, [step.most])]

    @answer.register
    async def _(self, step: wf.ExpireWaits) -> list[int]:
        return await self._pending(self.sql.WAITS_EXPIRED, [step.most, self.channel, self.now])

    @answer.register
    async def _(self, step: wf.SignalledParked) -> list[int]:
        return await self._pending(self.sql.PARKED_SIGNALLED, [step.most, self.channel, self.now])

    @answer.register
    async def _(self, step: wf.ResumeSignalled) -> list[int]:
        return await self._pending(self.sql.PARKED_RESUME, [list(step.ids), self.channel, self.now])

    @answer.register
    async def _(self, step: wf.TakeUnreleased) -> tuple[str | None, int | None] | None:
        rows = await self.fetch(self.sql.UNRELEASED_TAKE, [step.job_id])
        return (rows[0][0], rows[0][1]) if rows else None

    @answer.register
    async def _(self, step: wf.ChildEdges) -> list[tuple[int, str | None, str, str]]:
        rows = await self.fetch(self.sql.CHILD_EDGES, [step.child])
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    @answer.register
    async def _(self, step: wf.ReopenEdges) -> None:
        await self.fetch(self.sql.EDGES_REOPEN, [step.child, list(step.parents)])

    @answer.register
    async def _(self, step: wf.Rewait) -> None:
        args = [step.job_id, step.parents_left, step.pass_results, step.batch_id, step.who]
        await self.fetch(self.sql.JOB_REWAIT, [*args, self.now])

    @answer.register
    async def _(self, step: wf.StateOf) -> tuple[str, str | None]:
        rows = await self.fetch(self.sql.JOB_STATE_ERROR, [step.job_id])
        return (rows[0][0], rows[0][1])
