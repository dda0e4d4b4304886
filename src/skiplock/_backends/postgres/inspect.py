"""PostgreSQL's reads and actions a person drives: queues, task pauses, the audit trail, job
lists and counts, dead groups, retries and cancels, cron runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..._job import (
    AuditEntry,
    CronRun,
    DeadGroup,
    JobOutcome,
    JobRecord,
    JobState,
    QueueInfo,
    TaskPause,
)
from ...errors import JobNotFound
from .. import flows
from .. import workflow_flows as wf
from ..job_rows import dead_group, job_outcomes, job_record, queue_state_counts, state_counts
from ..params import (
    AuditListParams,
    AuditPruneParams,
    AuditRecordParams,
    DeadActionParams,
    JobActionParams,
    JobFindParams,
    JobListParams,
    QueueSetLimitsParams,
    QueueSetPausedParams,
    TaskPauseParams,
)
from . import rows as ops
from .connection import Connection, R
from .errors import wrapped as _wrapped
from .storage import reads


class Inspect(Connection):
    """Reads and actions a person drives: queues, pauses, audit, lists, dead jobs, cron."""

    if TYPE_CHECKING:  # other rooms' operations this one uses

        async def _wf_transaction(
            self, make: Callable[[], flows.Flow[R]], connection: object | None
        ) -> R: ...

    async def queue_list(self) -> list[QueueInfo]:
        with _wrapped("queue_list"):
            rows = await self.pool.fetch(self._sql.QUEUE_LIST)
        return [QueueInfo(*r) for r in rows]

    async def queue_info(self, queue: str) -> QueueInfo:
        with _wrapped("queue_info"):
            row = await self.pool.fetchrow(self._sql.QUEUE_INFO, queue)
        assert row is not None  # one row whatever the name
        return QueueInfo(*row)

    async def queue_known(self, queue: str) -> bool:
        with _wrapped("queue_known"):
            return bool(await self.pool.fetchval(self._sql.QUEUE_KNOWN, queue))

    async def queue_set_paused(self, params: QueueSetPausedParams) -> None:
        with _wrapped("queue_set_paused"):
            await self.pool.execute(self._sql.QUEUE_SET_PAUSED, params.queue, params.paused)

    async def queue_set_limits(self, params: QueueSetLimitsParams) -> None:
        p = params
        with _wrapped("queue_set_limits"):
            await self.pool.execute(
                self._sql.QUEUE_SET_LIMITS,
                p.queue,
                p.max_depth,
                p.max_running,
                p.rate_per_s,
                p.aging_s,
                sorted(p.given),
            )

    async def task_pause(self, params: TaskPauseParams) -> None:
        with _wrapped("task_pause"):
            await self.pool.execute(
                self._sql.TASK_PAUSE, params.task, params.for_s, params.reason, self._now()
            )

    async def task_resume(self, task: str) -> bool:
        with _wrapped("task_resume"):
            return bool(await self.pool.fetch(self._sql.TASK_RESUME, task))

    async def task_pauses(self) -> list[TaskPause]:
        with _wrapped("task_pauses"):
            rows = await self.pool.fetch(self._sql.TASK_PAUSES, self._now())
        return [TaskPause(*r) for r in rows]

    async def audit_record(self, params: AuditRecordParams) -> None:
        with _wrapped("audit_record"):
            await self.pool.execute(
                self._sql.AUDIT_RECORD,
                params.who,
                params.what,
                params.target,
                params.detail,
                self._now(),
            )

    async def audit_list(self, params: AuditListParams) -> list[AuditEntry]:
        with _wrapped("audit_list"):
            rows = await self.pool.fetch(self._sql.AUDIT_LIST, params.limit, params.before_id)
        return [AuditEntry(*r) for r in rows]

    async def audit_prune(self, params: AuditPruneParams) -> int:
        with _wrapped("audit_prune"):
            status = await self.pool.execute(
                self._sql.AUDIT_PRUNE, params.age_s, self._now(), params.batch
            )
        return int(status.split()[-1])

    async def audit_prune_preview(self, age_s: float) -> int:
        with _wrapped("audit_prune_preview"):
            return int(await self.pool.fetchval(self._sql.AUDIT_PRUNE_PREVIEW, age_s, self._now()))

    async def job_get(self, job_id: int) -> JobRecord:
        with _wrapped("job_get"):
            r = await self.pool.fetchrow(self._sql.JOB_GET, job_id)
        if r is None:
            raise JobNotFound(f"no job with id {job_id}")
        return job_record(r)

    async def job_outcome_many(self, job_ids: Sequence[int]) -> list[JobOutcome]:
        if not job_ids:
            return []
        with _wrapped("job_outcome_many"):
            rows = await self.pool.fetch(self._sql.JOB_OUTCOME_MANY, list(job_ids))
        return job_outcomes(rows)

    async def job_count_by_state(self, queue: str | None = None) -> dict[str, int]:
        with _wrapped("job_count_by_state"):
            live, rest = await reads.fetch_parts(self._reads, self._sql.JOB_COUNT_BY_STATE, queue)
        return state_counts((r["state"], r["n"]) for r in live + rest)

    async def job_count_by_queue(self) -> dict[str, dict[str, int]]:
        with _wrapped("job_count_by_queue"):
            live, rest = await reads.fetch_parts(self._reads, self._sql.JOB_COUNT_BY_QUEUE)
        return queue_state_counts((r["queue"], r["state"], r["n"]) for r in live + rest)

    async def job_retry(self, params: JobActionParams) -> bool:
        job_id, who = params.job_id, params.who
        with _wrapped("job_retry"):
            # one that ended waiting for its parents waits for them again; any other is
            # requeued as it is (JOB_RETRY leaves the first kind alone)
            if await self._wf_transaction(lambda: wf.retry_unreleased(job_id, who), None):
                return True
            rows = await self._retrying.fetch(
                self._sql.JOB_RETRY, job_id, self.channel, self._now(), who
            )
        return bool(rows)

    async def job_cancel(self, params: JobActionParams) -> JobState:
        with _wrapped("job_cancel"):
            state = await self._retrying.fetchval(
                self._sql.JOB_CANCEL, params.job_id, params.who, self._now()
            )
        if state is None:
            return (await self.job_get(params.job_id)).state
        return JobState(state)

    async def _read(self, how: str, statement: str, params: JobListParams, *more: Any) -> Any:
        """A person's filtered read (JOB_LIST's filter): of one state, on its partition alone;
        of every state, in two parts on one snapshot (storage/reads.py). ``how``: fetch, or
        fetchval for a count (the parts' counts added up)."""
        state = params.state.value if params.state else None
        args = (state, *ops.filter_params(params.where), *more)
        if state is not None:
            return await self._reads.by_state(how, statement, state, *args)
        live, rest = await reads.fetch_parts(self._reads, statement, *args)
        if how == "fetchval":
            return sum(int(r[0]) for r in live + rest)
        return live + rest

    async def job_list(self, params: JobListParams) -> list[JobRecord]:
        oldest = params.oldest_first
        statement = self._sql.JOB_LIST_OLDEST if oldest else self._sql.JOB_LIST
        with _wrapped("job_list"):
            rows = await self._read(
                "fetch", statement, params, params.where.limit, params.before_id
            )
        # each part's first `limit` by id: together, the first `limit` of both
        rows = sorted(rows, key=lambda r: r["id"], reverse=not oldest)[: params.where.limit]
        return [job_record(r) for r in rows]

    async def job_count(self, params: JobListParams) -> int:
        with _wrapped("job_count"):
            return int(await self._read("fetchval", self._sql.JOB_COUNT, params))

    async def job_count_states(self, params: JobListParams) -> dict[str, int]:
        with _wrapped("job_count_states"):
            rows = await self._read("fetch", self._sql.JOB_COUNT_STATES, params)
        return {r["state"]: int(r["n"]) for r in rows}

    async def job_find(self, params: JobFindParams) -> list[JobRecord]:
        with _wrapped("job_find"):
            live, rest = await reads.fetch_parts(
                self._reads, self._sql.JOB_FIND, params.text, params.limit
            )
        rows = sorted(live + rest, key=lambda r: r["id"], reverse=True)[: params.limit]
        return [job_record(r) for r in rows]

    async def job_dead_groups(self, limit: int) -> list[DeadGroup]:
        with _wrapped("job_dead_groups"):
            rows = await self._reads.one("fetch", self._sql.JOB_DEAD_GROUPS, limit)
        return [dead_group(r) for r in rows]

    async def job_requeue_dead(self, params: DeadActionParams) -> list[int]:
        with _wrapped("job_requeue_dead"):
            rows = await self._retrying.fetch(
                self._sql.JOB_REQUEUE_DEAD,
                params.who,
                *ops.filter_params(params.where),
                self._now(),
                self.channel,
                params.where.limit,
            )
        return [r["id"] for r in rows]

    async def job_discard_dead(self, params: DeadActionParams) -> list[int]:
        where = ops.filter_params(params.where)
        with _wrapped("job_discard_dead"):
            rows = await self._retrying.fetch(
                self._sql.JOB_DISCARD_DEAD, params.who, *where, self._now(), params.where.limit
            )
        return [r["id"] for r in rows]

    async def cron_last_slots(self) -> dict[str, datetime]:
        with _wrapped("cron_last_slots"):
            rows = await self.pool.fetch(self._sql.CRON_LAST_SLOTS)
        return {r["schedule"]: r["slot"] for r in rows}

    async def cron_last_runs(self) -> list[CronRun]:
        with _wrapped("cron_last_runs"):
            rows = await self.pool.fetch(self._sql.CRON_LAST_RUNS)
        return [CronRun(r["schedule"], r["slot"], r["job_id"]) for r in rows]

    async def cron_slots_prune(self, before: datetime) -> int:
        with _wrapped("cron_slots_prune"):
            status = await self.pool.execute(self._sql.CRON_SLOTS_PRUNE, before)
        return int(status.split()[-1])
