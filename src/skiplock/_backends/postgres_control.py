"""PostgreSQL operations a person drives (queue and task controls, job inspection and the
dead-letter actions, cron bookkeeping): off the hot path, kept apart from the worker's loop
of claims, completions and heartbeats in ``postgres.py``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from .._job import JobFilter, JobRecord, JobState, QueueInfo, TaskPause
from ..errors import JobNotFound
from .base import (
    DeadActionParams,
    JobActionParams,
    JobListParams,
    QueueSetLimitsParams,
    QueueSetPausedParams,
    TaskPauseParams,
)
from .common import filter_values, job_record
from .postgres_errors import wrapped as _wrapped
from .postgres_sql import Statements


def _filter_params(where: JobFilter) -> list[Any]:
    """A filter in the order the filtered statements take it ($2..$7)."""
    return list(filter_values(where).values())


class PostgresControl:
    """Mixed into PostgresBackend, which provides the pool, the statements and the clock."""

    channel: str
    _sql: Statements

    @property
    def pool(self) -> asyncpg.Pool:
        raise NotImplementedError

    def _now(self) -> datetime | None:
        raise NotImplementedError

    async def queue_list(self) -> list[QueueInfo]:
        with _wrapped("queue_list"):
            rows = await self.pool.fetch(self._sql.QUEUE_LIST)
        return [QueueInfo(*r) for r in rows]

    async def queue_set_paused(self, params: QueueSetPausedParams) -> None:
        with _wrapped("queue_set_paused"):
            await self.pool.execute(self._sql.QUEUE_SET_PAUSED, params.queue, params.paused)

    async def queue_set_limits(self, params: QueueSetLimitsParams) -> None:
        p = params
        with _wrapped("queue_set_limits"):
            await self.pool.execute(
                self._sql.QUEUE_SET_LIMITS, p.queue, p.max_depth, p.max_running, p.rate_per_s
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

    async def job_get(self, job_id: int) -> JobRecord:
        with _wrapped("job_get"):
            r = await self.pool.fetchrow(self._sql.JOB_GET, job_id)
        if r is None:
            raise JobNotFound(f"no job with id {job_id}")
        return job_record(r)

    async def job_count_by_state(self, queue: str | None = None) -> dict[str, int]:
        with _wrapped("job_count_by_state"):
            rows = await self.pool.fetch(self._sql.JOB_COUNT_BY_STATE, queue)
        counts = {state.value: 0 for state in JobState}
        counts.update({r["state"]: r["n"] for r in rows})
        return counts

    async def job_retry(self, params: JobActionParams) -> bool:
        with _wrapped("job_retry"):
            rows = await self.pool.fetch(
                self._sql.JOB_RETRY, params.job_id, self.channel, self._now(), params.who
            )
        return bool(rows)

    async def job_cancel(self, params: JobActionParams) -> JobState:
        with _wrapped("job_cancel"):
            state = await self.pool.fetchval(
                self._sql.JOB_CANCEL, params.job_id, params.who, self._now()
            )
        if state is None:
            return (await self.job_get(params.job_id)).state
        return JobState(state)

    async def job_list(self, params: JobListParams) -> list[JobRecord]:
        with _wrapped("job_list"):
            rows = await self.pool.fetch(
                self._sql.JOB_LIST,
                params.state.value if params.state else None,
                *_filter_params(params.where),
                params.where.limit,
            )
        return [job_record(r) for r in rows]

    async def job_requeue_dead(self, params: DeadActionParams) -> list[int]:
        with _wrapped("job_requeue_dead"):
            rows = await self.pool.fetch(
                self._sql.JOB_REQUEUE_DEAD,
                params.who,
                *_filter_params(params.where),
                self._now(),
                self.channel,
            )
        return [r["id"] for r in rows]

    async def job_discard_dead(self, params: DeadActionParams) -> list[int]:
        where = _filter_params(params.where)
        with _wrapped("job_discard_dead"):
            rows = await self.pool.fetch(
                self._sql.JOB_DISCARD_DEAD, params.who, *where, self._now()
            )
        return [r["id"] for r in rows]

    async def cron_last_slots(self) -> dict[str, datetime]:
        with _wrapped("cron_last_slots"):
            rows = await self.pool.fetch(self._sql.CRON_LAST_SLOTS)
        return {r["schedule"]: r["slot"] for r in rows}

    async def cron_slots_prune(self, before: datetime) -> int:
        with _wrapped("cron_slots_prune"):
            status = await self.pool.execute(self._sql.CRON_SLOTS_PRUNE, before)
        return int(status.split()[-1])
