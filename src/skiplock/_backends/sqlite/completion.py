"""SQLite's outcomes: a completion batch written in place or moved to its day's table
(storage/history.py), its workflow release in the same transaction; reclaims and heartbeats."""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
from collections.abc import Sequence
from typing import Any

from ..._job import DEFAULT_LANE, Completion, Disposition, ReclaimedJob
from ..._transitions import transition
from ...errors import BackendUnavailable
from .. import flows
from .. import workflow_flows as wf
from ..job_rows import reclaimed_jobs
from ..params import JobHeartbeatManyParams, JobReclaimWorkerParams
from ..protocol import MAX_ERRORS_KEPT
from ..sql_files import fill, listing
from .connection import immediate as _immediate
from .connection import savepoint as _savepoint
from .errors import classify as _classify
from .statements import STATEMENTS as sql
from .storage import history
from .workflow import WorkflowOps

log = logging.getLogger("skiplock.worker")

_OUTCOME = {
    "state": sql.FINISH_STATE,
    "attempt": sql.FINISH_ATTEMPT,
    "run_at": sql.FINISH_RUN_AT,
    "finished_at": sql.FINISH_FINISHED_AT,
    "lease_token": sql.FINISH_NULL,
    "lease_expires_at": sql.FINISH_NULL,
    "run_s": sql.FINISH_RUN_S,
    # parked on a signal: the unique index counts it as its key's holder (unique.py)
    "parked": sql.FINISH_PARKED,
    "errors": sql.FINISH_ERRORS,
}
"""One outcome's columns (decided in Python: _transitions.py), as JOB_SET_STATE_* write them:
errors are appended, keeping the last :max_errors."""

_KEEPING = {"result": sql.FINISH_RESULT, "progress": sql.FINISH_PROGRESS}
"""An outcome's result (:result) and a progress record left since the last heartbeat
(:progress, NULL: none)."""


def job_finish_into(table: str, columns: tuple[str, ...], keeping: bool) -> str:
    """One succeeded or cancelled outcome written straight into day table ``table`` (the live
    table's ``columns``, in order): the row as the update in place would leave it, copied
    while it still runs under its lease token; the caller deletes the live rows it copied.
    Not a succeeded job that keeps its unique key (the live table's unique index holds it):
    that outcome is written in place (FINISH_INTO)."""
    outcome = {**_OUTCOME, **_KEEPING} if keeping else _OUTCOME
    values = listing(outcome.get(name, name) for name in columns)
    return fill(sql.FINISH_INTO, table=table, columns=listing(columns), values=values)


finish_into = functools.lru_cache(maxsize=16)(job_finish_into)


def completion_args(c: Completion, now: float) -> dict[str, Any]:
    """One outcome's columns, as its transition says (the SQL only writes them)."""
    change = transition(c.disposition, c.delay_s)
    return {
        "id": c.job_id,
        "token": c.lease_token,
        "state": change.state.value,
        "attempt_delta": change.attempt_delta,
        "run_at": None if change.run_after_s is None else now + change.run_after_s,
        "finished_at": now if change.finished else None,
        "error": json.dumps(c.error) if c.error is not None else None,
        "max_errors": MAX_ERRORS_KEPT,
        "result": c.result_json,
        "progress": c.progress_json,
        "run_s": c.run_s,
        "lane": c.lane,
    }


def _keeping(c: Completion) -> bool:
    return c.result_json is not None or c.progress_json is not None


def completion_statement(c: Completion) -> str:
    """The cheaper statement unless the outcome carries a result or progress to store."""
    if _keeping(c):
        return sql.JOB_SET_STATE_KEEPING_RESULT
    return sql.JOB_SET_STATE_IF_RUNNING_MANY


def complete_batch(
    conn: sqlite3.Connection, completions: Sequence[Completion], now: float
) -> list[int]:
    """Write a batch of outcomes inside the caller's write transaction; the ids written.

    A succeeded or cancelled job goes straight into the day's table (storage/history.py): its
    row as the outcome leaves it is copied there while it still runs under its token, and
    the copied live rows are deleted in one statement at the end, in the same transaction (a
    row is in one table at every commit). Copying instead of updating first and moving after
    spares the update's rewrite of the row and its index entries. Other outcomes, and a
    success that keeps its unique key, are written in place."""
    applied: list[int] = []
    moved: list[int] = []
    target: tuple[str, tuple[str, ...]] | None = None
    looked = False
    for c in completions:
        args = completion_args(c, now)
        if args["state"] in history.MOVES:
            if not looked:
                target, looked = history.day_target(conn, now), True
            if target and conn.execute(finish_into(*target, _keeping(c)), args).rowcount:
                applied.append(c.job_id)
                moved.append(c.job_id)
                continue
        if conn.execute(completion_statement(c), args).rowcount:
            applied.append(c.job_id)
    if moved:
        conn.execute(sql.JOB_DELETE_MOVED, {"ids": json.dumps(moved)})
    return applied


FINISHING_DISPOSITIONS = frozenset({Disposition.SUCCEED, Disposition.CANCEL, Disposition.DEAD})
"""Outcomes after which a job's children may be released."""


class Completing(WorkflowOps):
    """Outcomes, reclaims and heartbeats."""

    async def job_set_state_if_running_many(self, completions: Sequence[Completion]) -> list[int]:
        if not completions:
            return []

        def complete(conn: sqlite3.Connection) -> tuple[list[int], set[str]]:
            with _immediate(conn):
                applied = complete_batch(conn, completions, self._now())
                woken = self._follow_completion(conn, completions, applied)
                return applied, woken

        applied, woken = await self._run("job_set_state_if_running_many", complete)
        if woken and self.on_released is not None:  # committed: this process's workers
            self.on_released(woken)  # claim now, before the file's watch would tell them
        return applied

    def _follow_completion(
        self, conn: sqlite3.Connection, completions: Sequence[Completion], applied: list[int]
    ) -> set[str]:
        """In the completion's transaction: release the children of jobs just finished (when
        any edge is open at all: one probe of an empty index otherwise), resume parked jobs
        already signalled. Returns the queues it made jobs pending in."""
        written = set(applied)
        parked = [
            c.job_id
            for c in completions
            if c.disposition is Disposition.PARK and c.job_id in written
        ]
        finished: list[int] = []
        if conn.execute(sql.ANY_OPEN_EDGE).fetchone()[0]:
            finished = [
                c.job_id
                for c in completions
                if c.disposition in FINISHING_DISPOSITIONS and c.job_id in written
            ]
        woken: set[str] = set()
        if finished or parked:
            try:
                with _savepoint(conn):  # the outcomes never wait for a release that fails
                    flows.drive(
                        wf.after_completion(finished, parked), self._wf_answers(conn, woken)
                    )
            except Exception as exc:
                if isinstance(exc, sqlite3.Error) and isinstance(
                    _classify("workflow release", exc), BackendUnavailable
                ):
                    raise
                log.warning(
                    "a completion's workflow release failed (the sweep tries it again): %s",
                    exc,
                    exc_info=exc,
                )
                woken.clear()
        return woken

    async def job_cancel_requested(self, job_ids: Sequence[int]) -> list[int]:
        if not job_ids:
            return []
        ids = json.dumps(list(job_ids))
        rows = await self._run(
            "job_cancel_requested",
            lambda c: c.execute(sql.JOB_CANCEL_REQUESTED, {"ids": ids}).fetchall(),
        )
        return [r[0] for r in rows]

    async def job_reclaim_expired(
        self, into: list[ReclaimedJob] | None = None, lane: str = "default"
    ) -> list[int]:
        def reclaim(conn: sqlite3.Connection) -> list[Any]:
            with _immediate(conn):
                args = {"now": self._now(), "max_errors": MAX_ERRORS_KEPT, "lane": lane}
                return conn.execute(sql.JOB_RECLAIM_EXPIRED, args).fetchall()

        rows = await self._run("job_reclaim_expired", reclaim)
        if into is not None:
            into += reclaimed_jobs(rows)
        return [r["id"] for r in rows]

    async def job_reclaim_worker(self, params: JobReclaimWorkerParams) -> list[int]:
        def reclaim(conn: sqlite3.Connection) -> list[Any]:
            with _immediate(conn):
                args = {
                    "now": self._now(),
                    "max_errors": MAX_ERRORS_KEPT,
                    "worker": params.worker_id,
                    "why": params.why,
                    "lane": params.lane,
                }
                return conn.execute(sql.JOB_RECLAIM_WORKER, args).fetchall()

        rows = await self._run("job_reclaim_worker", reclaim)
        if params.into is not None:
            params.into.extend(reclaimed_jobs(rows))
        return [r["id"] for r in rows]

    async def job_heartbeat_many(self, params: JobHeartbeatManyParams) -> list[tuple[int, str]]:
        if not params.held:
            return []

        def beat(conn: sqlite3.Connection) -> list[tuple[int, str]]:
            still: list[tuple[int, str]] = []
            with _immediate(conn):
                now = self._now()
                for job_id, token in params.held:
                    args = {
                        "id": job_id,
                        "token": token,
                        "now": now,
                        "default_lease": params.default_lease,
                        "margin": params.lease_margin,
                        "started": (job_id, token) in params.started,
                        "progress": params.progress.get(job_id),
                        "lane": params.lanes.get(job_id, DEFAULT_LANE),
                    }
                    if conn.execute(sql.JOB_HEARTBEAT_MANY, args).rowcount:
                        still.append((job_id, token))
            return still

        return await self._run("job_heartbeat_many", beat)
