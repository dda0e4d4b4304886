"""SQLite operations a person drives (queue and task controls, job inspection and the
dead-letter actions, cron bookkeeping): off the hot path, kept apart from the worker's loop
of claims, completions and heartbeats in ``sqlite.py``."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from .._job import JobFilter, JobRecord, JobState, QueueInfo, TaskPause
from ..errors import JobNotFound
from . import sqlite_sql as sql
from .base import (
    DeadActionParams,
    JobActionParams,
    JobListParams,
    QueueSetLimitsParams,
    QueueSetPausedParams,
    TaskPauseParams,
)
from .common import filter_values, job_record
from .sqlite_support import dt as _dt
from .sqlite_support import immediate as _immediate
from .sqlite_support import opt_dt as _opt_dt

T = TypeVar("T")


def _records(conn: sqlite3.Connection, statement: str, args: Any) -> list[JobRecord]:
    """Inspection rows, by column name. Text is read as bytes and decoded by the reader, so a
    value that is not UTF-8 (written by another producer) is shown with a note, not an error;
    only this read pays for it (the connection's thread runs one operation at a time)."""
    conn.text_factory = bytes
    try:
        cursor = conn.execute(statement, args)
        names = [d[0] for d in cursor.description]
        return [job_record(dict(zip(names, row, strict=True))) for row in cursor.fetchall()]
    finally:
        conn.text_factory = str


def _filter_params(where: JobFilter) -> dict[str, Any]:
    """A filter as the filtered statements take it: ids as a JSON array, times as seconds."""
    values = filter_values(where)
    if values["ids"] is not None:
        values["ids"] = json.dumps(values["ids"])
    for name in ("since", "until"):
        if values[name] is not None:
            values[name] = values[name].timestamp()
    return values


class SQLiteControl:
    """Mixed into SQLiteBackend, which provides the connection's thread and the clock."""

    async def _run(self, operation: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError

    def _now(self) -> float:
        raise NotImplementedError

    async def queue_list(self) -> list[QueueInfo]:
        rows = await self._run("queue_list", lambda c: c.execute(sql.QUEUE_LIST).fetchall())
        return [QueueInfo(r[0], r[1], r[2], r[3], bool(r[4]), r[5], r[6]) for r in rows]

    async def _write(self, operation: str, statement: str, args: Any) -> int:
        def write(conn: sqlite3.Connection) -> int:
            with _immediate(conn):
                return conn.execute(statement, args).rowcount

        return await self._run(operation, write)

    async def queue_set_paused(self, params: QueueSetPausedParams) -> None:
        args = {"name": params.queue, "paused": params.paused, "now": self._now()}
        await self._write("queue_set_paused", sql.QUEUE_SET_PAUSED, args)

    async def queue_set_limits(self, params: QueueSetLimitsParams) -> None:
        args = {
            "name": params.queue,
            "max_depth": params.max_depth,
            "max_running": params.max_running,
            "rate": params.rate_per_s,
            "now": self._now(),
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

    async def job_get(self, job_id: int) -> JobRecord:
        rows = await self._run("job_get", lambda c: _records(c, sql.JOB_GET, {"id": job_id}))
        if not rows:
            raise JobNotFound(f"no job with id {job_id}")
        return rows[0]

    async def job_count_by_state(self, queue: str | None = None) -> dict[str, int]:
        rows = await self._run(
            "job_count_by_state",
            lambda c: c.execute(sql.JOB_COUNT_BY_STATE, {"queue": queue}).fetchall(),
        )
        counts = {state.value: 0 for state in JobState}
        counts.update({state: n for state, n in rows})
        return counts

    async def job_retry(self, params: JobActionParams) -> bool:
        def retry(conn: sqlite3.Connection) -> bool:
            with _immediate(conn):
                args = {"id": params.job_id, "now": self._now(), "who": params.who}
                return conn.execute(sql.JOB_RETRY, args).rowcount > 0

        return await self._run("job_retry", retry)

    async def job_cancel(self, params: JobActionParams) -> JobState:
        def cancel(conn: sqlite3.Connection) -> Any:
            with _immediate(conn):
                args = {"id": params.job_id, "now": self._now(), "who": params.who}
                return conn.execute(sql.JOB_CANCEL, args).fetchone()

        row = await self._run("job_cancel", cancel)
        if row is None:
            return (await self.job_get(params.job_id)).state
        return JobState(row[0])

    async def job_list(self, params: JobListParams) -> list[JobRecord]:
        state = params.state.value if params.state else None
        args = {"state": state, "limit": params.where.limit, **_filter_params(params.where)}
        return await self._run("job_list", lambda c: _records(c, sql.JOB_LIST, args))

    async def _dead_action(self, statement: str, params: DeadActionParams) -> list[int]:
        def act(conn: sqlite3.Connection) -> list[int]:
            with _immediate(conn):
                args = {"who": params.who, "now": self._now(), **_filter_params(params.where)}
                return sorted(r[0] for r in conn.execute(statement, args).fetchall())

        return await self._run("dead-letter action", act)

    async def job_requeue_dead(self, params: DeadActionParams) -> list[int]:
        return await self._dead_action(sql.JOB_REQUEUE_DEAD, params)

    async def job_discard_dead(self, params: DeadActionParams) -> list[int]:
        return await self._dead_action(sql.JOB_DISCARD_DEAD, params)

    async def cron_last_slots(self) -> dict[str, datetime]:
        rows = await self._run(
            "cron_last_slots", lambda c: c.execute(sql.CRON_LAST_SLOTS).fetchall()
        )
        return {schedule: _dt(at) for schedule, at in rows}

    async def cron_slots_prune(self, before: datetime) -> int:
        def prune(conn: sqlite3.Connection) -> int:
            with _immediate(conn):
                return conn.execute(sql.CRON_SLOTS_PRUNE, {"before": before.timestamp()}).rowcount

        return await self._run("cron_slots_prune", prune)
