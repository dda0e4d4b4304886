"""What a person reads and drives on SQLite: jobs listed and found, dead-letter groups, retries and
cancels, prunes, queues and task pauses, the audit trail, cron's history."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..._job import (
    AuditEntry,
    BlockedKey,
    CronRun,
    DeadGroup,
    JobOutcome,
    JobRecord,
    JobState,
    KeyLoad,
    QueueInfo,
    TaskPause,
)
from ..._workflow_records import BatchInfo, JobLinks, LinkedJob, WaitingJob
from ...errors import JobNotFound
from .. import flows
from .. import workflow_flows as wf
from ..job_rows import (
    blocked_key,
    dead_group,
    job_outcomes,
    key_load,
    queue_state_counts,
    state_counts,
)
from ..params import (
    AuditListParams,
    AuditPruneParams,
    AuditRecordParams,
    DeadActionParams,
    JobActionParams,
    JobBusiestKeysParams,
    JobFindParams,
    JobListParams,
    JobPruneParams,
    QueueSetLimitsParams,
    QueueSetPausedParams,
    TaskPauseParams,
)
from ..workflow_params import WorkflowLinkedParams, WorkflowLinksParams
from ..workflow_rows import batch_info, job_links, linked_jobs, waiting_job
from . import rows as ops
from .connection import immediate as _immediate
from .rows import dt as _dt
from .rows import opt_dt as _opt_dt
from .statements import STATEMENTS as sql
from .storage import history
from .workflow import WorkflowOps


def _queue_info(r: Any) -> QueueInfo:
    return QueueInfo(r[0], r[1], r[2], r[3], bool(r[4]), r[5], r[6], r[7], r[8])


class Inspecting(WorkflowOps):
    """Reads and actions a person drives."""

    def _retention_args(self, params: JobPruneParams) -> dict[str, float]:
        now = self._now()
        return {
            "finished_before": now - params.finished_age_s,
            "dead_before": now - params.dead_age_s,
        }

    async def job_prune(self, params: JobPruneParams) -> int:
        def prune(conn: sqlite3.Connection) -> int:
            with _immediate(conn):
                args = {**self._retention_args(params), "batch": params.batch}
                # A whole day past the retention first, by DROP TABLE (no page rewritten;
                # one day a call, the caller calls again), then one batch of the rest: the
                # live table's finished and dead rows, and the day the cut-off falls inside.
                dropped = history.drop_expired(conn, args["finished_before"])
                if dropped:
                    return dropped
                deleted = conn.execute(sql.JOB_PRUNE, args).rowcount
                if deleted < params.batch:
                    deleted += history.prune_days(
                        conn, args["finished_before"], params.batch - deleted
                    )
                return int(deleted)

        return await self._run("job_prune", prune)

    async def job_prune_preview(self, params: JobPruneParams) -> dict[str, int]:
        def count(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(sql.JOB_PRUNE_PREVIEW, self._retention_args(params)).fetchall()
            return {str(state): int(n) for state, n in rows}

        return await self._run("job_prune_preview", count)

    # -- operations a person drives -------------------------------------------------------

    async def job_busiest_keys(self, params: JobBusiestKeysParams) -> list[KeyLoad]:
        def read(conn: sqlite3.Connection) -> list[Any]:
            args = {
                "limit": params.limit,
                "now": self._now(),
                "queue": params.queue,
                "task": params.task,
            }
            return conn.execute(sql.JOB_BUSIEST_KEYS, args).fetchall()

        return [key_load(r) for r in await self._run("job_busiest_keys", read)]

    async def job_blocked_keys(self, limit: int) -> list[BlockedKey]:
        def read(conn: sqlite3.Connection) -> list[Any]:
            return conn.execute(sql.JOB_BLOCKED_KEYS, {"limit": limit}).fetchall()

        rows = await self._run("job_blocked_keys", read)
        return [blocked_key(r) for r in rows]

    async def queue_list(self) -> list[QueueInfo]:
        rows = await self._run("queue_list", lambda c: c.execute(sql.QUEUE_LIST).fetchall())
        return [_queue_info(r) for r in rows]

    async def queue_info(self, queue: str) -> QueueInfo:
        row = await self._run(
            "queue_info", lambda c: c.execute(sql.QUEUE_INFO, {"queue": queue}).fetchone()
        )
        return _queue_info(row)

    async def queue_known(self, queue: str) -> bool:
        row = await self._run(
            "queue_known", lambda c: c.execute(sql.QUEUE_KNOWN, {"queue": queue}).fetchone()
        )
        return bool(row[0])

    async def queue_set_paused(self, params: QueueSetPausedParams) -> None:
        args = {"name": params.queue, "paused": params.paused, "now": self._now()}
        await self._write("queue_set_paused", sql.QUEUE_SET_PAUSED, args)

    async def queue_set_limits(self, params: QueueSetLimitsParams) -> None:
        args = {
            "name": params.queue,
            "max_depth": params.max_depth,
            "max_running": params.max_running,
            "rate": params.rate_per_s,
            "aging": params.aging_s,
            "now": self._now(),
            "set_depth": "max_depth" in params.given,
            "set_running": "max_running" in params.given,
            "set_rate": "rate_per_s" in params.given,
            "set_aging": "aging_s" in params.given,
        }
        await self._write("queue_set_limits", sql.QUEUE_SET_LIMITS, args)

    async def task_pause(self, params: TaskPauseParams) -> None:
        now = self._now()
        until = None if params.for_s is None else now + params.for_s
        args = {"task": params.task, "until": until, "reason": params.reason, "now": now}
        await self._write("task_pause", sql.TASK_PAUSE, args)

    async def task_resume(self, task: str) -> bool:
        return await self._write("task_resume", sql.TASK_RESUME, {"task": task}) > 0

    async def task_pauses(self) -> list[TaskPause]:
        rows = await self._run(
            "task_pauses", lambda c: c.execute(sql.TASK_PAUSES, {"now": self._now()}).fetchall()
        )
        return [TaskPause(r[0], _opt_dt(r[1]), r[2]) for r in rows]

    async def audit_record(self, params: AuditRecordParams) -> None:
        args = {
            "now": self._now(),
            "who": params.who,
            "what": params.what,
            "target": params.target,
            "detail": params.detail,
        }
        await self._write("audit_record", sql.AUDIT_RECORD, args)

    async def audit_list(self, params: AuditListParams) -> list[AuditEntry]:
        args = {"limit": params.limit, "before": params.before_id}
        rows = await self._run("audit_list", lambda c: c.execute(sql.AUDIT_LIST, args).fetchall())
        return [AuditEntry(r[0], _dt(r[1]), r[2], r[3], r[4], r[5]) for r in rows]

    async def audit_prune(self, params: AuditPruneParams) -> int:
        args = {"before": self._now() - params.age_s, "batch": params.batch}
        return await self._write("audit_prune", sql.AUDIT_PRUNE, args)

    async def audit_prune_preview(self, age_s: float) -> int:
        args = {"before": self._now() - age_s}
        rows = await self._run(
            "audit_prune_preview", lambda c: c.execute(sql.AUDIT_PRUNE_PREVIEW, args).fetchall()
        )
        return int(rows[0][0])

    async def job_get(self, job_id: int) -> JobRecord:
        rows = await self._run("job_get", lambda c: ops.records(c, sql.JOB_GET, {"id": job_id}))
        if not rows:
            raise JobNotFound(f"no job with id {job_id}")
        return rows[0]

    async def job_outcome_many(self, job_ids: Sequence[int]) -> list[JobOutcome]:
        if not job_ids:
            return []
        ids = json.dumps(list(job_ids))

        def read(conn: sqlite3.Connection) -> list[JobOutcome]:
            cursor = conn.execute(sql.JOB_OUTCOME_MANY, {"ids": ids})
            names = [d[0] for d in cursor.description]
            return job_outcomes(dict(zip(names, r, strict=True)) for r in cursor.fetchall())

        return await self._run("job_outcome_many", read)

    async def job_count_by_state(self, queue: str | None = None) -> dict[str, int]:
        rows = await self._run(
            "job_count_by_state",
            lambda c: c.execute(sql.JOB_COUNT_BY_STATE, {"queue": queue}).fetchall(),
        )
        return state_counts((state, n) for state, n in rows)

    async def job_count_by_queue(self) -> dict[str, dict[str, int]]:
        rows = await self._run(
            "job_count_by_queue", lambda c: c.execute(sql.JOB_COUNT_BY_QUEUE).fetchall()
        )
        return queue_state_counts(rows)

    async def job_retry(self, params: JobActionParams) -> bool:
        def retry(conn: sqlite3.Connection) -> bool:
            with _immediate(conn):
                # one that ended waiting for its parents waits for them again; any other is
                # requeued as it is (JOB_RETRY leaves the first kind alone)
                flow = wf.retry_unreleased(params.job_id, params.who)
                if flows.drive(flow, self._wf_answers(conn)):
                    return True
                args = {"id": params.job_id, "now": self._now(), "who": params.who}
                history.move_back(conn, params.job_id)  # a day table's job: live again first
                conn.execute(sql.JOB_KEYS_PASSED, args)  # windows that have passed free their keys
                return conn.execute(sql.JOB_RETRY, args).rowcount > 0

        return await self._run("job_retry", retry)

    async def job_cancel(self, params: JobActionParams) -> JobState:
        def cancel(conn: sqlite3.Connection) -> Any:
            with _immediate(conn):
                args = {"id": params.job_id, "now": self._now(), "who": params.who}
                # a job waiting for its parents keeps what their release would give it
                conn.execute(sql.UNRELEASED_KEEP_WAITING, args)
                return conn.execute(sql.JOB_CANCEL, args).fetchone()

        row = await self._run("job_cancel", cancel)
        if row is None:
            return (await self.job_get(params.job_id)).state
        return JobState(row[0])

    async def job_list(self, params: JobListParams) -> list[JobRecord]:
        state = params.state.value if params.state else None
        args = {
            "state": state,
            "limit": params.where.limit,
            "before": params.before_id,
            **ops.filter_params(params.where),
        }
        statement = sql.JOB_LIST_OLDEST if params.oldest_first else sql.JOB_LIST
        return await self._run("job_list", lambda c: ops.records(c, statement, args))

    async def job_count(self, params: JobListParams) -> int:
        state = params.state.value if params.state else None
        args = {"state": state, **ops.filter_params(params.where)}
        row = await self._run("job_count", lambda c: c.execute(sql.JOB_COUNT, args).fetchone())
        return int(row[0])

    async def job_count_states(self, params: JobListParams) -> dict[str, int]:
        state = params.state.value if params.state else None
        args = {"state": state, **ops.filter_params(params.where)}

        def count(conn: sqlite3.Connection) -> dict[str, int]:
            return {str(s): int(n) for s, n in conn.execute(sql.JOB_COUNT_STATES, args)}

        return await self._run("job_count_states", count)

    async def job_find(self, params: JobFindParams) -> list[JobRecord]:
        args = {"text": params.text, "limit": params.limit}
        return await self._run("job_find", lambda c: ops.records(c, sql.JOB_FIND, args))

    async def job_dead_groups(self, limit: int) -> list[DeadGroup]:
        def read(conn: sqlite3.Connection) -> list[DeadGroup]:
            cursor = conn.execute(sql.JOB_DEAD_GROUPS, {"limit": limit})
            names = [d[0] for d in cursor.description]
            return [dead_group(dict(zip(names, r, strict=True))) for r in cursor.fetchall()]

        return await self._run("job_dead_groups", read)

    async def _dead_action(
        self, statement: str, params: DeadActionParams, first: str | None = None
    ) -> list[int]:
        def act(conn: sqlite3.Connection) -> list[int]:
            with _immediate(conn):
                if first is not None:
                    conn.execute(first, {"now": self._now()})
                args = {
                    "who": params.who,
                    "now": self._now(),
                    "limit": params.where.limit,
                    **ops.filter_params(params.where),
                }
                return sorted(r[0] for r in conn.execute(statement, args).fetchall())

        return await self._run("dead-letter action", act)

    async def job_requeue_dead(self, params: DeadActionParams) -> list[int]:
        # windows that have passed let their keys go first: a requeued job may take one
        return await self._dead_action(sql.JOB_REQUEUE_DEAD, params, sql.JOB_KEYS_PASSED)

    async def job_discard_dead(self, params: DeadActionParams) -> list[int]:
        return await self._dead_action(sql.JOB_DISCARD_DEAD, params)

    async def cron_last_slots(self) -> dict[str, datetime]:
        rows = await self._run(
            "cron_last_slots", lambda c: c.execute(sql.CRON_LAST_SLOTS).fetchall()
        )
        return {schedule: _dt(at) for schedule, at in rows}

    async def cron_last_runs(self) -> list[CronRun]:
        rows = await self._run("cron_last_runs", lambda c: c.execute(sql.CRON_LAST_RUNS).fetchall())
        return [CronRun(schedule, _dt(at), job_id) for schedule, at, job_id in rows]

    async def cron_slots_prune(self, before: datetime) -> int:
        def prune(conn: sqlite3.Connection) -> int:
            with _immediate(conn):
                return conn.execute(sql.CRON_SLOTS_PRUNE, {"before": before.timestamp()}).rowcount

        return await self._run("cron_slots_prune", prune)

    async def workflow_links(self, params: WorkflowLinksParams) -> JobLinks:
        job_id, children_limit = params.job_id, params.children_limit
        parents_limit = params.parents_limit

        def read(conn: sqlite3.Connection) -> JobLinks:
            parents = conn.execute(sql.JOB_PARENTS, (job_id, parents_limit)).fetchall()
            counts = conn.execute(sql.JOB_PARENT_COUNTS, (job_id,)).fetchall()
            children = conn.execute(sql.JOB_CHILDREN, (job_id, 0, children_limit)).fetchall()
            wait = conn.execute(sql.JOB_WAIT, (job_id,)).fetchone()
            batch = conn.execute(sql.JOB_BATCH, {"id": job_id}).fetchone()
            batch_id = None if batch is None else batch[0]
            return job_links(parents, children, wait, batch_id, counts)

        return await self._run("workflow_links", read)

    async def workflow_linked(self, params: WorkflowLinkedParams) -> list[LinkedJob]:
        statement = sql.JOB_PARENTS_AFTER if params.parents else sql.JOB_CHILDREN
        args = (params.job_id, params.after, params.limit)
        rows = await self._run("workflow_linked", lambda c: c.execute(statement, args).fetchall())
        return linked_jobs(rows)

    async def workflow_batch_info(self, batch_id: int) -> BatchInfo:
        row = await self._run(
            "workflow_batch_info", lambda c: c.execute(sql.BATCH_INFO, (batch_id,)).fetchone()
        )
        if row is None:
            raise JobNotFound(f"batch {batch_id}: no such batch")
        return batch_info(row)

    async def workflow_waiting(self, limit: int) -> list[WaitingJob]:
        rows = await self._run(
            "workflow_waiting", lambda c: c.execute(sql.WAITING_LIST, (limit,)).fetchall()
        )
        return [waiting_job(r) for r in rows]
