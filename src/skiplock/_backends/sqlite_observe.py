"""SQLite's observability operations, run on the backend's thread: a statistics reading (one
read transaction, one snapshot) and the worker registry's writes."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from .params import KEYS_IN_STATS, JobStatsParams, JobStatsRows, WorkerBeatParams
from .percentiles import bucket_samples, ranks_from_buckets
from .sqlite_observe_sql import (
    JOB_STATS_FINISHED,
    JOB_STATS_LIVE,
    JOB_STATS_PERCENTILES,
    JOB_STATS_RECLAIMS,
)
from .sqlite_sql import JOB_BLOCKED_KEYS, JOB_BUSIEST_KEYS
from .sqlite_support import dt


def job_stats(conn: sqlite3.Connection, params: JobStatsParams, now: float) -> JobStatsRows:
    args = {
        "now": now,
        "since": now - params.window_s,
        "queue": params.queue,
        "task": params.task,
    }

    def rows(statement: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in conn.execute(statement, args).fetchall()]

    conn.execute("BEGIN")  # deferred: a read snapshot across the four statements, no lock
    try:
        return JobStatsRows(
            now=dt(now),
            live=rows(JOB_STATS_LIVE),
            finished=rows(JOB_STATS_FINISHED),
            reclaims=rows(JOB_STATS_RECLAIMS),
            ranks=ranks_from_buckets(bucket_samples(conn.execute(JOB_STATS_PERCENTILES, args))),
            blocked=[tuple(r) for r in conn.execute(JOB_BLOCKED_KEYS, {"limit": KEYS_IN_STATS})],
            keys=[
                tuple(r) for r in conn.execute(JOB_BUSIEST_KEYS, {**args, "limit": KEYS_IN_STATS})
            ],
        )
    finally:
        conn.execute("COMMIT")


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
    }
