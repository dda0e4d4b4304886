"""PostgreSQL's observability operations: a statistics reading and the worker registry.

``postgres.py`` binds these to its pool; they are apart to keep that module the list of the
job lifecycle's operations.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from .base import KEYS_IN_STATS, JobStatsParams, JobStatsRows, WorkerBeatParams
from .percentiles import ranks_from_buckets
from .postgres_sql import Statements


async def job_stats(
    pool: asyncpg.Pool, sql: Statements, params: JobStatsParams, now: datetime | None
) -> JobStatsRows:
    """Every statement of a reading in one REPEATABLE READ, read-only transaction: one
    snapshot and one now(), so the numbers agree with each other."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        at: datetime = await conn.fetchval(sql.JOB_STATS_NOW, now)
        args = (at, at - timedelta(seconds=params.window_s), params.queue, params.task)

        async def rows(statement: str) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in await conn.fetch(statement, *args)]

        return JobStatsRows(
            now=at,
            live=await rows(sql.JOB_STATS_LIVE),
            finished=await rows(sql.JOB_STATS_FINISHED),
            reclaims=await rows(sql.JOB_STATS_RECLAIMS),
            ranks=ranks_from_buckets(await rows(sql.JOB_STATS_PERCENTILES)),
            blocked=[tuple(r) for r in await conn.fetch(sql.JOB_BLOCKED_KEYS, KEYS_IN_STATS)],
            keys=[
                tuple(r)
                for r in await conn.fetch(
                    sql.JOB_BUSIEST_KEYS, at, params.queue, params.task, KEYS_IN_STATS
                )
            ],
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
    ]
