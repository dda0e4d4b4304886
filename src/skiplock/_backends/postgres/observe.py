"""PostgreSQL's observability operations: a statistics reading and the worker registry.

``Observe`` (below) binds these to the backend's pools.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from ..._job import WorkerInfo
from ..job_rows import worker_info
from ..params import KEYS_IN_STATS, JobStatsParams, JobStatsRows, WorkerBeatParams
from ..percentiles import ranks_from_buckets
from .connection import Connection
from .errors import wrapped as _wrapped
from .statements import Statements
from .storage.reads import Reads


async def job_stats(
    reads: Reads, sql: Statements, params: JobStatsParams, now: datetime | None
) -> JobStatsRows:
    """One reading on one snapshot and one now(), so the numbers agree with each other: the
    live partition's statements first, in a transaction that ends as soon as they are read,
    then the history's, dead and waiting jobs' on the same snapshot in another session
    (``storage.reads.split``), which holds no lock a rotation of the live segments waits for
    however long its window takes to read."""

    def window(at: datetime) -> tuple[Any, ...]:
        return (at, at - timedelta(seconds=params.window_s), params.queue, params.task)

    async def rows(conn: Any, statement: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in await conn.fetch(statement, *args)]

    async def live(conn: Any, at: datetime) -> tuple[list[Any], ...]:
        args = window(at)
        keys_args = (at, params.queue, params.task, KEYS_IN_STATS)
        return (
            await rows(conn, sql.JOB_STATS_LIVE, args),
            await rows(conn, sql.JOB_STATS_RECLAIMS, args),
            await rows(conn, sql.JOB_STATS_PERCENTILES, args),
            await rows(conn, sql.JOB_BLOCKED_KEYS, (KEYS_IN_STATS,)),
            await rows(conn, sql.JOB_BUSIEST_KEYS, keys_args),
        )

    async def rest(conn: Any, at: datetime) -> tuple[list[Any], ...]:
        args = window(at)
        return (
            await rows(conn, sql.JOB_STATS_WAITING, args),
            await rows(conn, sql.JOB_STATS_FINISHED, args),
            await rows(conn, sql.JOB_STATS_RECLAIMS_REST, args),
            await rows(conn, sql.JOB_STATS_PERCENTILES_REST, args),
        )

    at, (live_rows, reclaims, claims, blocked, keys), history = await reads.split(live, rest, now)
    waiting, finished, reclaims_rest, buckets = history
    return JobStatsRows(
        now=at,
        live=live_rows + waiting,
        finished=finished,
        reclaims=reclaims + reclaims_rest,
        ranks=ranks_from_buckets(claims + buckets),
        blocked=blocked,
        keys=keys,
    )


def beat_args(params: WorkerBeatParams, now: datetime | None) -> list[Any]:
    """WORKER_BEAT's arguments."""
    p = params
    queues = None if p.queues is None else json.dumps(list(p.queues))
    return [
        p.id,
        p.name,
        p.host,
        p.pid,
        queues,
        p.concurrency,
        p.running,
        p.processed,
        p.claimed_ago_s,
        now,
        p.gone_after_s,
        p.process,
        p.restarts,
        p.restarts_in_a_row,
        p.children,
    ]


class Observe(Connection):
    """Health numbers and the worker registry."""

    async def job_stats(self, params: JobStatsParams) -> JobStatsRows:
        with _wrapped("job_stats"):
            return await job_stats(self._reads, self._sql, params, self._now())

    async def worker_beat(self, params: WorkerBeatParams) -> None:
        with _wrapped("worker_beat"):
            await self.pool.execute(self._sql.WORKER_BEAT, *beat_args(params, self._now()))

    async def worker_delete(self, worker_id: str) -> None:
        with _wrapped("worker_delete"):
            await self.pool.execute(self._sql.WORKER_DELETE, worker_id)

    async def worker_prune(self, silent_s: float) -> int:
        with _wrapped("worker_prune"):
            status = await self.pool.execute(self._sql.WORKER_PRUNE, silent_s, self._now())
        return int(status.split()[-1])

    async def worker_list(self) -> list[WorkerInfo]:
        with _wrapped("worker_list"):
            rows = await self.pool.fetch(self._sql.WORKER_LIST, self._now())
        return [worker_info(r, lambda t: t) for r in rows]
