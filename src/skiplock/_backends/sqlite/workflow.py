"""SQLite's answers to the workflow flows (``workflow_flows.py``) and its workflow reads and
writes, each on the one connection, inside a transaction the caller holds (SQLite has one
writer at a time, so the flows' row locks are the file's write lock)."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..._payload import DEFAULT_MAX_PAYLOAD_BYTES
from ..._workflow_records import SignalOutcome, SignalReceipt, StoredSignal, WorkflowGraph
from ...errors import JobNotFound
from .. import flows, workflow_sweep
from .. import workflow_flows as wf
from ..workflow_params import (
    WorkflowAbortBatchParams,
    WorkflowAfterCompletionParams,
    WorkflowEnqueueParams,
    WorkflowEnqueueSyncParams,
    WorkflowGraphParams,
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
    gathered_too_large,
    mailbox_full,
    signal_taken,
    stored_signal,
)
from .connection import Connected, immediate
from .connection import immediate as _immediate
from .connection import own_sqlite as _own_sqlite
from .connection import savepoint as _savepoint
from .enqueue import insert_rows
from .errors import wrapped as _wrapped
from .statements import STATEMENTS as sql
from .storage import history
from .storage.ids import BATCHES

R = TypeVar("R")


class Answers:
    """The workflow flows' steps on one SQLite connection."""

    def __init__(
        self,
        conn: Any,
        now: Callable[[], float],
        woken: Callable[[set[str]], None],
        bound: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self.conn, self.now, self.woken = conn, now, woken
        self.bound = bound
        """The most bytes the list of a child's parents' results may take (``Ready``)."""

    def __call__(self, step: object) -> Any:
        return self.answer(step)

    @functools.singledispatchmethod
    def answer(self, step: object) -> Any:
        raise TypeError(f"no SQLite answer to {step!r}")

    @answer.register
    def _(self, step: wf.FindMissing) -> list[int]:
        rows = self.conn.execute(sql.JOBS_PRESENT, {"ids": json.dumps(list(step.ids))})
        present = {r[0] for r in rows}
        return [i for i in step.ids if i not in present]

    @answer.register
    def _(self, step: wf.InsertJobs) -> list[int]:
        ids = insert_rows(self.conn, list(step.jobs), self.now())
        waiting = [i for i, w in zip(ids, step.waiting, strict=True) if w]
        if waiting:  # inserted in this transaction: no worker saw them pending
            self.conn.execute(sql.JOBS_TO_WAITING, {"ids": json.dumps(waiting)})
        return ids

    @answer.register
    def _(self, step: wf.InsertWaits) -> None:
        now = self.now()
        self.conn.executemany(sql.WAIT_INSERT, [(*row, now) for row in step.rows])

    @answer.register
    def _(self, step: wf.AddParents) -> None:
        self.conn.executemany(sql.WAITS_ADD, [(n, job) for job, n in step.rows])

    @answer.register
    def _(self, step: wf.InsertEdges) -> None:
        self.conn.executemany(sql.DEP_INSERT, step.rows)

    @answer.register
    def _(self, step: wf.InsertBatch) -> int:
        self.conn.execute(sql.ID_FLOOR_RAISE, {"name": BATCHES})  # past ids a rollback took back
        return int(self.conn.execute(sql.BATCH_INSERT, (self.now(),)).fetchone()[0])

    @answer.register
    def _(self, step: wf.SetCallbacks) -> None:
        args = (step.on_success, step.on_complete, step.batch_id)
        self.conn.execute(sql.BATCH_SET_CALLBACKS, args)

    @answer.register
    def _(self, step: wf.LockBatch) -> tuple[bool, int | None, int | None] | None:
        row = self.conn.execute(sql.BATCH_GET, (step.batch_id,)).fetchone()
        return None if row is None else (bool(row[0]), row[1], row[2])

    @answer.register
    def _(self, step: wf.CloseBatch) -> tuple[int | None, int | None] | None:
        row = self.conn.execute(sql.BATCH_CLOSE, (self.now(), step.batch_id)).fetchone()
        return None if row is None else (row[0], row[1])

    @answer.register
    def _(self, step: wf.AbortBatch) -> tuple[int | None, int | None] | None:
        args = {"id": step.batch_id, "now": self.now()}
        row = self.conn.execute(sql.BATCH_ABORT, args).fetchone()
        return None if row is None else (row[0], row[1])

    @answer.register
    def _(self, step: wf.CancelMembers) -> list[int]:
        args = {"batch": step.batch_id, "error": step.error, "now": self.now()}
        ids = sorted(r[0] for r in self.conn.execute(sql.MEMBERS_CANCEL, args).fetchall())
        if ids:
            self.conn.execute(sql.WAITS_DELETE, {"ids": json.dumps(ids)})
        return ids

    @answer.register
    def _(self, step: wf.AncestorsMeet) -> bool:
        args = {"from": json.dumps(list(step.starts)), "to": json.dumps(list(step.targets))}
        return bool(self.conn.execute(sql.ANCESTORS_MEET, args).fetchone()[0])

    @answer.register
    def _(self, step: wf.InsertMembers) -> None:
        rows = [(step.batch_id, i) for i in step.ids]
        self.conn.executemany(sql.BATCH_MEMBER_INSERT, rows)

    @answer.register
    def _(self, step: wf.ResolveEdges) -> list[tuple[int, int, str, str]]:
        now = self.now()
        states = self.conn.execute(sql.PARENTS_STATE, {"ids": json.dumps(list(step.parents))})
        resolved: list[tuple[int, int, str, str]] = []
        for parent, state, result in states.fetchall():
            if state is not None and state not in FINAL_STATES:
                continue  # still live: its edges wait for it
            final = state or "gone"
            args = {"final": final, "now": now, "parent": parent}
            rows = self.conn.execute(sql.EDGES_RESOLVE, args).fetchall()
            if rows and final == "succeeded":  # once for all its edges, not a copy on each
                self.conn.execute(sql.RESULT_KEEP, {"parent": parent, "result": result})
            resolved += sorted((child, parent, final, policy) for child, policy in rows)
        return resolved

    @answer.register
    def _(self, step: wf.Decrement) -> list[int]:
        counts = json.dumps({str(child): n for child, n in step.counts.items()})
        rows = self.conn.execute(sql.WAITS_DECREMENT, {"counts": counts}).fetchall()
        return sorted(job for job, left in rows if left == 0)

    @answer.register
    def _(self, step: wf.CancelChildren) -> list[int]:
        cancelled = []
        now = self.now()
        for child, error in step.errors.items():
            args = {"id": child, "error": error, "now": now}
            if self.conn.execute(sql.CHILD_CANCEL, args).rowcount:
                cancelled.append(child)
                self.conn.execute(sql.UNRELEASED_KEEP, {"id": child, "now": now})
            self.conn.execute(sql.WAIT_DELETE, (child,))
        return cancelled

    @answer.register
    def _(self, step: wf.Ready) -> tuple[list[int], list[int]]:
        """Set-based where the arguments stay as they are or take the one parent's result
        (a fan-out's 9,999 children: a few statements, not five a child); a child given a list
        of results or its batch's id (a chord's body, a callback: one) one by one, a body
        whose list would be over the bound buried instead (its size summed first)."""
        now = self.now()
        ids = json.dumps(sorted(step.ids))
        waits = self.conn.execute(sql.WAITS_READY, {"ids": ids}).fetchall()
        if not waits:
            return [], []
        over, buried = self._bury_oversized([w[0] for w in waits if w[1] == "all"], now)
        waits = [w for w in waits if w[0] not in over]
        if not waits:
            return [], sorted(buried)
        self.conn.execute(sql.WAITS_DELETE, {"ids": json.dumps([w[0] for w in waits])})
        made: list[Any] = []
        for mode, statement in (
            (None, sql.CHILDREN_READY),
            ("previous", sql.CHILDREN_READY_PREVIOUS),
        ):
            these = [w[0] for w in waits if w[1] == mode]
            if these:
                named = {"ids": json.dumps(these), "now": now}
                made += self.conn.execute(statement, named).fetchall()
        for child, mode, batch_id in (w for w in waits if w[1] not in (None, "previous")):
            args = self._args_with_results(child, mode, batch_id)
            row = self.conn.execute(sql.CHILD_READY, {"id": child, "now": now, "args": args})
            made += row.fetchall()
        self.woken({queue for _id, queue in made})
        return sorted(job for job, _queue in made), sorted(buried)

    def _bury_oversized(self, bodies: list[int], now: float) -> tuple[set[int], set[int]]:
        """The bodies among ``bodies`` whose list of results would be over the bound (their
        wait rows taken), and of those the ones buried: dead with a PayloadTooLarge error,
        their release kept for a retry, never run (one already cancelled stays so)."""
        over: set[int] = set()
        buried: set[int] = set()
        for child in bodies:
            n, size = self.conn.execute(sql.CHILD_RESULTS_SIZE, (child,)).fetchone()
            if size <= self.bound:
                continue
            over.add(child)
            error = gathered_too_large(n, size, self.bound, now)
            args = {"id": child, "error": error, "now": now}
            if self.conn.execute(sql.CHILD_BURY, args).rowcount:
                buried.add(child)
                self.conn.execute(sql.UNRELEASED_KEEP, {"id": child, "now": now})
            self.conn.execute(sql.WAIT_DELETE, (child,))
        return over, buried

    def _args_with_results(self, child: int, mode: str | None, batch_id: int | None) -> str | None:
        """The child's arguments with its parents' results first, as ``mode`` asks (None:
        left as they are)."""
        if mode is None:
            return None
        if mode == "batch":
            first = str(batch_id)
        else:
            results = [r[0] for r in self.conn.execute(sql.CHILD_RESULTS, (child,))]
            if mode == "previous":
                first = results[0] if results else "null"
            else:
                first = "[" + ",".join(results) + "]"
        (args,) = self.conn.execute(sql.JOB_ARGS, (child,)).fetchone()
        rest = args.strip()[1:-1].strip()
        return f"[{first},{rest}]" if rest else f"[{first}]"

    @answer.register
    def _(self, step: wf.EdgesAround) -> list[tuple[int, int]]:
        rows = self.conn.execute(sql.GRAPH_EDGES, {"ids": json.dumps(list(step.ids))})
        return [(r[0], r[1]) for r in rows]

    @answer.register
    def _(self, step: wf.GraphNodes) -> list[tuple[int, str, str]]:
        rows = self.conn.execute(sql.GRAPH_NODES, {"ids": json.dumps(list(step.ids))})
        return [(r[0], r[1], r[2]) for r in rows]

    @answer.register
    def _(self, step: wf.OpenParents) -> list[int]:
        return [r[0] for r in self.conn.execute(sql.OPEN_PARENTS, {"most": step.most})]

    @answer.register
    def _(self, step: wf.StrandedWaits) -> list[int]:
        return [r[0] for r in self.conn.execute(sql.STRANDED_WAITS, {"most": step.most})]

    @answer.register
    def _(self, step: wf.ExpireWaits) -> list[int]:
        now = self.now()
        due = self.conn.execute(sql.WAITS_EXPIRED, {"now": now, "most": step.most}).fetchall()
        return self._resume([(job, (name, seq)) for job, name, seq in due], timeout=True)

    @answer.register
    def _(self, step: wf.SignalledParked) -> list[int]:
        rows = self.conn.execute(sql.PARKED_SIGNALLED_ANY, {"most": step.most})
        return self._resume([(r[0], None) for r in rows.fetchall()], timeout=False)

    @answer.register
    def _(self, step: wf.ResumeSignalled) -> list[int]:
        args = {"ids": json.dumps(list(step.ids))}
        due = [(r[0], None) for r in self.conn.execute(sql.PARKED_SIGNALLED, args)]
        return self._resume(due, timeout=False)

    def _resume(
        self, due: Sequence[tuple[int, tuple[str, int] | None]], *, timeout: bool
    ) -> list[int]:
        """Parked jobs run again now (``due``: each with the mailbox entry its timeout takes,
        if ``timeout``)."""
        resumed, queues = [], set()
        now = self.now()
        for job, entry in due:
            if timeout and entry is not None:
                self.conn.execute(sql.TIMEOUT_MARK, (job, *entry, now))
            self.conn.execute(sql.WAIT_DELETE, (job,))
            found = self.conn.execute(sql.JOB_RESUME, {"id": job, "now": now}).fetchone()
            if found is not None:
                resumed.append(job)
                queues.add(found[0])
        self.woken(queues)
        return resumed

    @answer.register
    def _(self, step: wf.TakeUnreleased) -> tuple[str | None, int | None] | None:
        row = self.conn.execute(sql.UNRELEASED_GET, {"id": step.job_id}).fetchone()
        if row is None:
            return None
        history.move_back(self.conn, step.job_id)  # a day table's job: live again first
        self.conn.execute(sql.UNRELEASED_DELETE, {"id": step.job_id})
        return row[0], row[1]

    @answer.register
    def _(self, step: wf.ChildEdges) -> list[tuple[int, str | None, str, str]]:
        rows = self.conn.execute(sql.CHILD_EDGES, (step.child,)).fetchall()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    @answer.register
    def _(self, step: wf.ReopenEdges) -> None:
        args = {"child": step.child, "parents": json.dumps(list(step.parents))}
        self.conn.execute(sql.EDGES_REOPEN, args)

    @answer.register
    def _(self, step: wf.Rewait) -> None:
        now = self.now()
        wait = {
            "id": step.job_id,
            "left": step.parents_left,
            "pass_results": step.pass_results,
            "batch_id": step.batch_id,
            "now": now,
        }
        self.conn.execute(sql.WAIT_REWRITE, wait)
        self.conn.execute(sql.JOB_REWAIT, {"id": step.job_id, "who": step.who, "now": now})

    @answer.register
    def _(self, step: wf.StateOf) -> tuple[str, str | None]:
        row = self.conn.execute(sql.JOB_STATE_ERROR, (step.job_id,)).fetchone()
        return row[0], row[1]


def signal(conn: Any, sent: WorkflowSignalParams, now: float) -> tuple[SignalReceipt, str | None]:
    """Deliver a signal (inside the caller's write transaction): the end of its name's
    mailbox, the job run again if it waits for it, and the job's audit trail (a finished
    job's row is left alone: nothing is kept). Returns the receipt and the queue woken (a
    parked job resumed), if any; MailboxFull if the job keeps as many signals as it may."""
    job_id, name = sent.job_id, sent.name
    row = conn.execute(sql.JOB_STATE, (job_id,)).fetchone()
    if row is None:
        raise JobNotFound(f"job {job_id}: no such job")
    if row[0] in FINAL_STATES:
        return SignalReceipt(job_id, name, SignalOutcome.FINISHED), None
    args = {
        "id": job_id,
        "name": name,
        "payload": sent.payload_json,
        "now": now,
        "who": sent.who,
        "most": sent.kept_most,
    }
    appended = conn.execute(sql.SIGNAL_APPEND, args).fetchone()
    if appended is None:
        raise mailbox_full(job_id, sent.kept_most)
    receipt = signal_taken(
        job_id, name, appended[0], conn.execute(sql.WAIT_OF, (job_id,)).fetchone()
    )
    what = f"signal {name}: {receipt.outcome.value}"
    conn.execute(sql.JOB_AUDIT_ADD, {"id": job_id, "who": sent.who, "what": what, "now": now})
    if not receipt.awaited:
        return receipt, None
    found = conn.execute(sql.JOB_RESUME, {"id": job_id, "now": now}).fetchone()
    if found is None:  # still running towards its park: the park's look finds the signal
        return receipt, None
    conn.execute(sql.WAIT_DELETE, (job_id,))
    return receipt, found[0]


def take_signal(conn: Any, job_id: int, name: str, seq: int) -> StoredSignal | None:
    """Entry ``seq`` of the job's mailbox ``name``, marked taken the first time (a write
    transaction of its own; a re-run's read of it writes nothing)."""
    row = conn.execute(sql.SIGNAL_GET, (job_id, name, seq)).fetchone()
    if row is None:
        return None
    if not row[4]:
        with immediate(conn):
            conn.execute(sql.SIGNAL_TAKEN, (job_id, name, seq))
    return stored_signal(row[0], row[1], row[2], row[3])


def _no_wake(_queues: set[str]) -> None:
    """SQLite's workers see every commit through the file's data-version watch."""


class WorkflowOps(Connected):
    """The workflow operations (workflow_flows.py's flows, answered by Answers)."""

    # -- workflows (queries/workflow.sql) -------------------------------------------------

    def _wf_answers(self, conn: sqlite3.Connection, woken: set[str] | None = None) -> Answers:
        return Answers(
            conn,
            self._now,
            _no_wake if woken is None else woken.update,
            self.max_payload_bytes,
        )

    async def _wf_write(self, operation: str, make: Callable[[], flows.Flow[R]]) -> R:
        """The flow in one write transaction; the queues it made jobs pending in are told to
        this process's workers once it committed (they claim now, not at the file's watch)."""
        woken: set[str] = set()

        def run(conn: sqlite3.Connection) -> R:
            woken.clear()
            with _immediate(conn):
                return flows.drive(make(), self._wf_answers(conn, woken))

        result = await self._run(operation, run)
        self._tell_released(woken)
        return result

    def _tell_released(self, woken: set[str]) -> None:
        if woken and self.on_released is not None:
            self.on_released(woken)

    async def workflow_enqueue(self, params: WorkflowEnqueueParams) -> list[int]:
        plan, connection = params.plan, params.connection
        if connection is not None:
            return self.workflow_enqueue_sync(WorkflowEnqueueSyncParams(plan, connection))
        return await self._wf_write("workflow_enqueue", lambda: wf.enqueue_plan(plan))

    def workflow_enqueue_sync(self, params: WorkflowEnqueueSyncParams) -> list[int]:
        """``workflow_enqueue`` on the caller's own sqlite3 connection, in its transaction."""
        own = _own_sqlite(params.connection)
        with _wrapped("workflow_enqueue"), self._handing_out(own), _savepoint(own):
            return flows.drive(wf.enqueue_plan(params.plan), self._wf_answers(own))

    async def workflow_open_batch(self, params: WorkflowOpenBatchParams) -> int:
        on_success, on_complete = params.on_success, params.on_complete
        if params.connection is not None:
            own = _own_sqlite(params.connection)
            flow = wf.open_batch(on_success, on_complete)
            with _wrapped("workflow_open_batch"), self._handing_out(own), _savepoint(own):
                return flows.drive(flow, self._wf_answers(own))
        return await self._wf_write(
            "workflow_open_batch", lambda: wf.open_batch(on_success, on_complete)
        )

    async def workflow_close_batch(self, batch_id: int) -> bool:
        return await self._wf_write("workflow_close_batch", lambda: wf.close_batch(batch_id))

    async def workflow_release(self, parents: Sequence[int]) -> list[int]:
        if not parents:
            return []
        return await self._wf_write("workflow_release", lambda: wf.release(list(parents)))

    async def workflow_after_completion(self, params: WorkflowAfterCompletionParams) -> list[int]:
        return await self._wf_write(
            "workflow_after_completion",
            lambda: wf.after_completion(params.finished, params.parked),
        )

    async def workflow_sweep(self) -> SweepResult:
        async def run(make: Callable[[], flows.Flow[R]]) -> R:
            return await self._wf_write("workflow_sweep", make)

        return await workflow_sweep.sweep(run)

    async def workflow_expire_waits(self) -> list[int]:
        return await self._wf_write("workflow_expire_waits", wf.expire_waits)

    async def workflow_next_wait_timeout(self) -> float | None:
        row = await self._run(
            "workflow_next_wait_timeout",
            lambda c: c.execute(sql.WAIT_NEXT_TIMEOUT, {"now": self._now()}).fetchone(),
        )
        return None if row is None or row[0] is None else float(row[0])

    async def workflow_abort_batch(self, params: WorkflowAbortBatchParams) -> bool:
        return await self._wf_write(
            "workflow_abort_batch", lambda: wf.abort_batch(params.batch_id, params.error_json)
        )

    async def workflow_wait_prepare(self, params: WorkflowWaitPrepareParams) -> bool:
        args = {
            "id": params.job_id,
            "token": params.token,
            "name": params.name,
            "seq": params.seq,
            "now": self._now(),
        }

        def prepare(conn: sqlite3.Connection) -> bool:
            with _immediate(conn):
                return conn.execute(sql.WAIT_PREPARE, args).fetchone() is not None

        return await self._run("workflow_wait_prepare", prepare)

    async def workflow_signal(self, params: WorkflowSignalParams) -> SignalReceipt:
        woken: list[str] = []

        def send(conn: sqlite3.Connection) -> SignalReceipt:
            woken.clear()
            with _immediate(conn):
                receipt, queue = signal(conn, params, self._now())
                woken.extend([queue] if queue is not None else [])
                return receipt

        receipt = await self._run("workflow_signal", send)
        self._tell_released(set(woken))
        return receipt

    async def workflow_signal_take(self, params: WorkflowSignalTakeParams) -> StoredSignal | None:
        return await self._run(
            "workflow_signal_take",
            lambda c: take_signal(c, params.job_id, params.name, params.seq),
        )

    async def workflow_step_get(self, params: WorkflowStepGetParams) -> tuple[bool, str | None]:
        key = (params.job_id, params.name, params.seq)
        row = await self._run(
            "workflow_step_get", lambda c: c.execute(sql.STEP_GET, key).fetchone()
        )
        return (False, None) if row is None else (True, row[0])

    async def workflow_step_put(self, params: WorkflowStepPutParams) -> bool:
        args = {
            "id": params.job_id,
            "token": params.token,
            "name": params.name,
            "seq": params.seq,
            "result": params.result_json,
        }

        def put(conn: sqlite3.Connection) -> bool:
            with _immediate(conn):
                return bool(conn.execute(sql.STEP_PUT, {**args, "now": self._now()}).rowcount)

        return await self._run("workflow_step_put", put)

    async def workflow_parent_results(
        self, job_id: int
    ) -> list[tuple[int, str | None, str | None]]:
        rows = await self._run(
            "workflow_parent_results",
            lambda c: c.execute(sql.PARENT_RESULTS, (job_id,)).fetchall(),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def workflow_graph(self, params: WorkflowGraphParams) -> WorkflowGraph:
        flow = wf.graph(params.job_id, params.most)
        return await self._run(
            "workflow_graph", lambda conn: flows.drive(flow, self._wf_answers(conn))
        )

    async def workflow_prune(self, most: int) -> int:
        def prune(conn: sqlite3.Connection) -> int:
            with _immediate(conn):
                conn.execute(sql.BATCH_MEMBERS_PRUNED, {"most": most})  # not a row pruned
                return sum(
                    conn.execute(statement, {"most": most}).rowcount
                    for statement in (
                        sql.WORKFLOW_PRUNE_STEPS,
                        sql.WORKFLOW_PRUNE_SIGNALS,
                        sql.WORKFLOW_PRUNE_DEPS,
                        sql.WORKFLOW_PRUNE_WAITS,
                        sql.WORKFLOW_PRUNE_BATCH_JOBS,
                        sql.WORKFLOW_PRUNE_BATCHES,
                        sql.WORKFLOW_PRUNE_PARENT_RESULTS,
                        sql.WORKFLOW_PRUNE_UNRELEASED,
                    )
                )

        return await self._run("workflow_prune", prune)
