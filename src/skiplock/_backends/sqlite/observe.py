"""SQLite's observability operations, run on the backend's thread: a statistics reading (one
read transaction, one snapshot) and the worker registry's writes."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..._job import WorkerInfo
from ..job_rows import worker_info
from ..params import KEYS_IN_STATS, JobStatsParams, JobStatsRows, WorkerBeatParams
from ..percentiles import bucket_samples, ranks_from_buckets
from .connection import Connected
from .rows import dt
from .rows import dt as _dt
from .statements import STATEMENTS as sql


def job_stats(conn: sqlite3.Connection, params: JobStatsParams, now: float) -> JobStatsRows:
    args = {
        "now": now,
        "since": now - params.window_s,
        "queue": params.queue,
        "task": params.task,
    }

    def rows(statement: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in conn.execute(statement, args).fetchall()]

    conn.execute(
        sql.TRANSACTION_BEGIN_DEFERRED
    )  # deferred: a read snapshot across the four statements, no lock
    try:
        return JobStatsRows(
            now=dt(now),
            live=rows(sql.JOB_STATS_LIVE),
            finished=rows(sql.JOB_STATS_FINISHED),
            reclaims=rows(sql.JOB_STATS_RECLAIMS),
            ranks=ranks_from_buckets(bucket_samples(conn.execute(sql.JOB_STATS_PERCENTILES, args))),
            blocked=[
                tuple(r) for r in conn.execute(sql.JOB_BLOCKED_KEYS, {"limit": KEYS_IN_STATS})
            ],
            keys=[
                tuple(r)
                for r in conn.execute(sql.JOB_BUSIEST_KEYS, {**args, "limit": KEYS_IN_STATS})
            ],
        )
    finally:
        conn.execute(sql.TRANSACTION_COMMIT)


def beat_args(params: WorkerBeatParams, now: float) -> dict[str, Any]:
    p = params
    return {
        "id": p.id,
        "name": p.name,
        "host": p.host,
        "pid": p.pid,
        "queues": None if p.queues is None else json.dumps(list(p.queues)),
        "concurrency": p.concurrency,
        "running": p.running,
        "processed": p.processed,
        "claimed_ago": p.claimed_ago_s,
        "now": now,
        "gone_after_s": p.gone_after_s,
        "process": p.process,
        "restarts": p.restarts,
        "restarts_in_a_row": p.restarts_in_a_row,
        "children": p.children,
    }


class Observing(Connected):
    """The health numbers and the worker registry."""

    # -- observability ----------------------------------------------------------------------

    async def job_stats(self, params: JobStatsParams) -> JobStatsRows:
        now = self._now()
        return await self._run("job_stats", lambda c: job_stats(c, params, now))

    async def worker_beat(self, params: WorkerBeatParams) -> None:
        await self._write("worker_beat", sql.WORKER_BEAT, beat_args(params, self._now()))

    async def worker_delete(self, worker_id: str) -> None:
        await self._write("worker_delete", sql.WORKER_DELETE, {"id": worker_id})

    async def worker_prune(self, silent_s: float) -> int:
        args = {"silent_s": silent_s, "now": self._now()}
        return await self._write("worker_prune", sql.WORKER_PRUNE, args)

    async def worker_list(self) -> list[WorkerInfo]:
        def read(conn: sqlite3.Connection) -> list[WorkerInfo]:
            rows = conn.execute(sql.WORKER_LIST, {"now": self._now()}).fetchall()
            return [worker_info(r, _dt) for r in rows]

        return await self._run("worker_list", read)
