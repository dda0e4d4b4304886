"""PostgreSQL's answers to the workflow flows (``workflow_flows.py``), on an asyncpg or a
psycopg (async) connection, and its one-statement workflow reads and writes.

The tables: PostgreSQL's workflow storage (waiting jobs, their edges, batches, durable
steps, signals).

Why apart from the job table (docs/design.md, "Workflows"): a job that waits (on parents or on
a signal) is a row in ``state = 'waiting'``, in a partition of its own, so claims never walk
it; everything else a workflow needs lives in four small tables that only workflow jobs
write, so a plain job's enqueue, claim and completion stay exactly as they were:

- ``skiplock_waits``: one row per waiting job, the counter of parents it still waits for (the
  row every release locks, so the last two parents finishing at the same instant on two
  workers decrement it one after the other and exactly one sees zero), what its first
  argument becomes when it is released, and the signal a parked job waits for;
- ``skiplock_deps``: one row per edge, resolved once (``parent_state`` set under the edge's
  own row lock);
- ``skiplock_parent_results``: a parent's result, kept once for every edge from it when they
  resolve, so a child's inputs outlive the parent's retention without a copy per edge (edges
  resolved before migration 23 keep their own copy, ``skiplock_deps.parent_result``, read
  first); it goes when the last edge from its parent does. A parent that succeeds again (a
  person retried it) and resolves new edges replaces it: every child then reads the newest;
- ``skiplock_batches`` and ``skiplock_batch_jobs``: a batch, its callbacks (jobs waiting on
  every member and on the batch's open gate) and its members. A member's row goes with its
  job (the prune after the job's), and the batch counts it from then on
  (``skiplock_batches.pruned_members``, migration 26): its counts keep every member it ever
  had, the pruned ones as ``gone``, so they stay whole for a callback that reads them. The
  batch goes once it is closed and has no member row and no callback left;
- ``skiplock_steps`` (a durable step's stored result, one row per job, name and occurrence:
  the third ``step("charge", ...)`` of a run is ``("charge", 3)`` in every run) and
  ``skiplock_signals`` (a job's mailbox: the signals of each name in the order they came,
  numbered from 1, and a wait's timeout in the place of the signal it waited for; the n-th
  ``wait_for(name)`` of a run takes entry n);
- ``skiplock_unreleased``: what the release of a job that ended while it waited (cancelled,
  or buried for the size of its parents' results) would have given it, for a retry.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any, TypeVar

import asyncpg

from ..._job import NewJob
from ..._payload import DEFAULT_MAX_PAYLOAD_BYTES
from ..._workflow_records import (
    BatchInfo,
    JobLinks,
    LinkedJob,
    SignalOutcome,
    SignalReceipt,
    StoredSignal,
    WaitingJob,
    WorkflowGraph,
)
from ...errors import JobNotFound
from .. import flows, workflow_sweep
from .. import workflow_flows as wf
from ..params import JobInsertManyParams
from ..workflow_params import (
    WorkflowAbortBatchParams,
    WorkflowAfterCompletionParams,
    WorkflowEnqueueParams,
    WorkflowEnqueueSyncParams,
    WorkflowGraphParams,
    WorkflowLinkedParams,
    WorkflowLinksParams,
    WorkflowOpenBatchParams,
    WorkflowSignalParams,
    WorkflowSignalTakeParams,
    WorkflowStepGetParams,
    WorkflowStepPutParams,
    WorkflowWaitPrepareParams,
)
from ..workflow_plan import SweepResult
from ..workflow_rows import (
    FINAL_STATES,
    batch_info,
    job_links,
    linked_jobs,
    mailbox_full,
    signal_taken,
    stored_signal,
    waiting_job,
)
from .completion import Outcomes
from .connection import WORKFLOW_TRIES, R, _begins_implicitly
from .enqueue import Enqueue
from .errors import retry_moved
from .errors import wrapped as _wrapped
from .rows import COPY_MIN_ROWS, to_psycopg
from .statements import WorkflowStatements

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


class Workflow(Enqueue, Outcomes):
    """Workflow operations."""

    def _wf_answers(self, conn: Any) -> Answers:
        return Answers(
            conn,
            self._wf,
            self.channel,
            self._now(),
            self.job_insert_many,
            self.schema,
            self._copy_asyncpg,
            bound=self.max_payload_bytes,
        )

    async def _wf_transaction(
        self, make: Callable[[], flows.Flow[R]], connection: object | None
    ) -> R:
        """A workflow flow in one transaction: the caller's (``connection``), or one of ours,
        run again from the start where it met a row moved between partitions or a deadlock
        (each attempt a new flow: nothing of a rolled-back one is kept)."""
        if connection is not None:  # a savepoint inside the caller's transaction, or one
            if _begins_implicitly(connection):
                await connection.execute(self._sql.SESSION_CHECK)  # type: ignore[attr-defined]
            async with connection.transaction():  # type: ignore[attr-defined]
                return await flows.drive_async(make(), self._wf_answers(connection))
        result, woken = await self._wf_own_transaction(make)
        if woken and self.on_released is not None:  # this process's workers claim at once
            self.on_released(woken)
        return result

    async def _wf_own_transaction(self, make: Callable[[], flows.Flow[R]]) -> tuple[R, set[str]]:
        """The flow in a transaction of ours; its result and the queues it made jobs pending
        in (told after the commit)."""

        async def attempt() -> tuple[R, set[str]]:
            async with self.pool.acquire() as conn, conn.transaction():
                answers = self._wf_answers(conn)
                return await flows.drive_async(make(), answers), answers.woken

        for _ in range(WORKFLOW_TRIES - 1):
            try:
                return await retry_moved(attempt)
            except asyncpg.exceptions.DeadlockDetectedError:
                continue
        return await retry_moved(attempt)

    async def workflow_enqueue(self, params: WorkflowEnqueueParams) -> list[int]:
        plan, connection = params.plan, params.connection
        with _wrapped("workflow_enqueue"):
            return await self._wf_transaction(lambda: wf.enqueue_plan(plan), connection)

    def workflow_enqueue_sync(self, params: WorkflowEnqueueSyncParams) -> list[int]:
        """``workflow_enqueue`` on the caller's synchronous psycopg connection (Django's, a
        SQLAlchemy session's), in its transaction (a savepoint inside it)."""
        plan, connection = params.plan, params.connection

        async def insert(rows: JobInsertManyParams) -> list[int]:
            return self.job_insert_many_sync(rows)

        answers = Answers(
            connection,
            self._wf,
            self.channel,
            self._now(),
            insert,
            self.schema,
            sync=True,
            bound=self.max_payload_bytes,
        )
        if _begins_implicitly(connection):
            connection.execute(self._sql.SESSION_CHECK)  # type: ignore[attr-defined]
        with _wrapped("workflow_enqueue"), connection.transaction():  # type: ignore[attr-defined]
            return flows.drive(wf.enqueue_plan(plan), lambda step: run_now(answers(step)))

    async def workflow_open_batch(self, params: WorkflowOpenBatchParams) -> int:
        on_success, on_complete = params.on_success, params.on_complete
        connection = params.connection
        with _wrapped("workflow_open_batch"):
            return await self._wf_transaction(
                lambda: wf.open_batch(on_success, on_complete), connection
            )

    async def workflow_close_batch(self, batch_id: int) -> bool:
        with _wrapped("workflow_close_batch"):
            return await self._wf_transaction(lambda: wf.close_batch(batch_id), None)

    async def workflow_release(self, parents: Sequence[int]) -> list[int]:
        if not parents:
            return []
        with _wrapped("workflow_release"):
            return await self._wf_transaction(lambda: wf.release(list(parents)), None)

    async def workflow_after_completion(self, params: WorkflowAfterCompletionParams) -> list[int]:
        finished, parked = params.finished, params.parked
        with _wrapped("workflow_after_completion"):
            return await self._wf_transaction(lambda: wf.after_completion(finished, parked), None)

    async def workflow_sweep(self) -> SweepResult:
        async def run(make: Callable[[], flows.Flow[R]]) -> R:
            with _wrapped("workflow_sweep"):
                return await self._wf_transaction(make, None)

        return await workflow_sweep.sweep(run)

    async def workflow_expire_waits(self) -> list[int]:
        with _wrapped("workflow_expire_waits"):
            return await self._wf_transaction(wf.expire_waits, None)

    async def workflow_next_wait_timeout(self) -> float | None:
        with _wrapped("workflow_next_wait_timeout"):
            seconds: float | None = await self.pool.fetchval(
                self._wf.WAIT_NEXT_TIMEOUT, self._now()
            )
        return seconds

    async def workflow_abort_batch(self, params: WorkflowAbortBatchParams) -> bool:
        batch_id, error_json = params.batch_id, params.error_json
        with _wrapped("workflow_abort_batch"):
            return await self._wf_transaction(lambda: wf.abort_batch(batch_id, error_json), None)

    async def workflow_wait_prepare(self, params: WorkflowWaitPrepareParams) -> bool:
        job_id, token, name, seq = params.job_id, params.token, params.name, params.seq
        with _wrapped("workflow_wait_prepare"):
            row = await self.pool.fetchval(self._wf.WAIT_PREPARE, job_id, token, name, seq)
        return row is not None

    async def workflow_signal(self, params: WorkflowSignalParams) -> SignalReceipt:
        job_id, name, payload_json = params.job_id, params.name, params.payload_json
        who, kept_most = params.who, params.kept_most

        async def attempt() -> SignalReceipt:
            async with self.pool.acquire() as conn, conn.transaction():
                state = await conn.fetchval(self._wf.JOB_LOCK_STATE, job_id)
                if state is None:
                    raise JobNotFound(f"job {job_id}: no such job")
                if state in FINAL_STATES:
                    receipt = SignalReceipt(job_id, name, SignalOutcome.FINISHED)
                else:
                    seq = await conn.fetchval(
                        self._wf.SIGNAL_APPEND, job_id, name, payload_json, who, kept_most
                    )
                    if seq is None:
                        raise mailbox_full(job_id, kept_most)
                    wait = await conn.fetchrow(self._wf.WAIT_OF, job_id)
                    receipt = signal_taken(job_id, name, seq, None if wait is None else tuple(wait))
                    if receipt.awaited:
                        await conn.execute(
                            self._wf.SIGNAL_WAKE, job_id, name, self.channel, self._now()
                        )
                    # a finished job's row is left alone: skiplock_audit has the signal
                    what = f"signal {name}: {receipt.outcome.value}"
                    await conn.execute(self._wf.JOB_AUDIT_ADD, job_id, who, what, self._now())
                return receipt

        with _wrapped("workflow_signal"):
            return await retry_moved(attempt)

    async def workflow_signal_take(self, params: WorkflowSignalTakeParams) -> StoredSignal | None:
        job_id, name, seq = params.job_id, params.name, params.seq
        with _wrapped("workflow_signal_take"):
            row = await self.pool.fetchrow(self._wf.SIGNAL_TAKE, job_id, name, seq)
        return None if row is None else stored_signal(*row)

    async def workflow_step_get(self, params: WorkflowStepGetParams) -> tuple[bool, str | None]:
        job_id, name, seq = params.job_id, params.name, params.seq
        with _wrapped("workflow_step_get"):
            row = await self.pool.fetchrow(self._wf.STEP_GET, job_id, name, seq)
        return (False, None) if row is None else (True, row[0])

    async def workflow_step_put(self, params: WorkflowStepPutParams) -> bool:
        job_id, token, name, seq = params.job_id, params.token, params.name, params.seq
        result_json = params.result_json
        with _wrapped("workflow_step_put"):
            row = await self.pool.fetchval(self._wf.STEP_PUT, job_id, token, name, result_json, seq)
        return row is not None

    async def workflow_parent_results(
        self, job_id: int
    ) -> list[tuple[int, str | None, str | None]]:
        with _wrapped("workflow_parent_results"):
            rows = await self.pool.fetch(self._wf.PARENT_RESULTS, job_id)
        return [(r[0], r[1], r[2]) for r in rows]

    async def workflow_links(self, params: WorkflowLinksParams) -> JobLinks:
        job_id, children_limit = params.job_id, params.children_limit
        parents_limit = params.parents_limit
        with _wrapped("workflow_links"):
            async with self.pool.acquire() as conn:
                parents = await conn.fetch(self._wf.JOB_PARENTS, job_id, parents_limit)
                counts = await conn.fetch(self._wf.JOB_PARENT_COUNTS, job_id)
                children = await conn.fetch(self._wf.JOB_CHILDREN, job_id, children_limit, 0)
                wait = await conn.fetchrow(self._wf.JOB_WAIT, job_id)
                batch = await conn.fetchval(self._wf.JOB_BATCH, job_id)
        return job_links(
            map(tuple, parents),
            map(tuple, children),
            None if wait is None else tuple(wait),
            batch,
            map(tuple, counts),
        )

    async def workflow_linked(self, params: WorkflowLinkedParams) -> list[LinkedJob]:
        job_id, parents, after, limit = params.job_id, params.parents, params.after, params.limit
        with _wrapped("workflow_linked"):
            if parents:
                rows = await self.pool.fetch(self._wf.JOB_PARENTS_AFTER, job_id, after, limit)
            else:
                rows = await self.pool.fetch(self._wf.JOB_CHILDREN, job_id, limit, after)
        return linked_jobs(map(tuple, rows))

    async def workflow_batch_info(self, batch_id: int) -> BatchInfo:
        with _wrapped("workflow_batch_info"):
            row = await self.pool.fetchrow(self._wf.BATCH_INFO, batch_id)
        if row is None:
            raise JobNotFound(f"batch {batch_id}: no such batch")
        return batch_info(tuple(row))

    async def workflow_waiting(self, limit: int) -> list[WaitingJob]:
        with _wrapped("workflow_waiting"):
            rows = await self.pool.fetch(self._wf.WAITING_LIST, limit)
        return [waiting_job(tuple(r)) for r in rows]

    async def workflow_graph(self, params: WorkflowGraphParams) -> WorkflowGraph:
        job_id, most = params.job_id, params.most
        with _wrapped("workflow_graph"):
            async with self.pool.acquire() as conn:
                return await flows.drive_async(wf.graph(job_id, most), self._wf_answers(conn))

    async def workflow_prune(self, most: int) -> int:
        with _wrapped("workflow_prune"):
            return int(await self.pool.fetchval(self._wf.WORKFLOW_PRUNE, most))
