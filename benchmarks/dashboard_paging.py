"""How long a Jobs page of the dashboard takes to read at a million rows (issue 14).

Fills a fresh PostgreSQL schema and a SQLite file with ``--rows`` jobs (default 1,000,000:
95 % succeeded, 4 % pending, 1 % dead, over four queues), then times ``app.list_jobs`` as the
Jobs page calls it (51 rows, keyset) at the top, in the middle and at the bottom of the table,
unfiltered and filtered by state or by queue and state, and the dead-letter grouping. Each
number is the median of ``--repeat`` reads.

    .venv/bin/python -m benchmarks.dashboard_paging [--rows N] [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg

import skiplock
from skiplock import JobFilter, JobState

from .common import DEFAULT_PG_URL

PAGE = 51  # the page's 50 rows and one more to know there is a next page

FILL_PG = """
INSERT INTO {table} (queue, task, state, max_attempts, attempt, created_at, finished_at,
                     errors)
SELECT 'q' || (i % 4), 'task' || (i % 10),
       CASE WHEN i % 100 = 0 THEN 'dead' WHEN i % 25 = 1 THEN 'pending' ELSE 'succeeded' END,
       3, 1, now() - make_interval(secs => {rows} - i),
       CASE WHEN i % 25 = 1 THEN NULL ELSE now() - make_interval(secs => {rows} - i) END,
       CASE WHEN i % 100 = 0 THEN jsonb_build_array(jsonb_build_object('message',
            'ValueError: bad ' || (i % 7), 'attempt', 1)) ELSE '[]'::jsonb END
FROM generate_series(1, {rows}) AS i
"""

FILL_SQLITE = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
INSERT INTO skiplock_jobs_live (queue, task, state, max_attempts, attempt, run_at, created_at,
                           finished_at, errors)
SELECT 'q' || (i % 4), 'task' || (i % 10),
       CASE WHEN i % 100 = 0 THEN 'dead' WHEN i % 25 = 1 THEN 'pending' ELSE 'succeeded' END,
       3, 1, 0, 1e9 + i, CASE WHEN i % 25 = 1 THEN NULL ELSE 1e9 + i END,
       CASE WHEN i % 100 = 0 THEN json_array(json_object('message',
            'ValueError: bad ' || (i % 7), 'attempt', 1)) ELSE '[]' END
FROM n
"""


async def median_ms(read: Callable[[], Awaitable[Any]], repeat: int) -> float:
    await read()  # plan and cache once, as a dashboard that has served a page has
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        await read()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def measure(app: skiplock.App, rows: int, repeat: int) -> list[tuple[str, float]]:
    def page(state: JobState | None, queue: str | None, before: int | None) -> Any:
        where = JobFilter(queue=queue, limit=PAGE)
        return lambda: app.list_jobs(state, where, before_id=before)

    cases = [
        ("all, first page", page(None, None, None)),
        ("all, middle page", page(None, None, rows // 2)),
        ("all, last page", page(None, None, PAGE + 1)),
        ("dead (1 %), first page", page(JobState.DEAD, None, None)),
        ("dead (1 %), middle page", page(JobState.DEAD, None, rows // 2)),
        ("pending in q1, middle page", page(JobState.PENDING, "q1", rows // 2)),
        ("dead letters grouped", lambda: app.dead_groups()),
    ]
    return [(name, await median_ms(read, repeat)) for name, read in cases]


async def postgres(rows: int, repeat: int) -> list[tuple[str, float]]:
    url = os.environ.get("SKIPLOCK_BENCH_POSTGRES_URL", DEFAULT_PG_URL)
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(url)
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    app = skiplock.App(f"{url}{'&' if '?' in url else '?'}schema={schema}")
    try:
        await app.migrate()
        table = f'"{schema}".skiplock_jobs'
        await admin.execute(FILL_PG.format(table=table, rows=rows))
        await admin.execute(f"ANALYZE {table}")
        return await measure(app, rows, repeat)
    finally:
        await app.close()
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()


async def sqlite(rows: int, repeat: int) -> list[tuple[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.db"
        app = skiplock.App(f"sqlite:///{path}")
        await app.migrate()
        await app.close()
        conn = sqlite3.connect(path, isolation_level=None)
        conn.executescript(f"BEGIN; {FILL_SQLITE.format(rows=rows)}; COMMIT; ANALYZE;")
        conn.close()
        try:
            return await measure(app, rows, repeat)
        finally:
            await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    for name, run in (("PostgreSQL", postgres), ("SQLite", sqlite)):
        results = asyncio.run(run(args.rows, args.repeat))
        print(f"{name}, {args.rows:,} jobs: median of {args.repeat} reads")
        for case, ms in results:
            print(f"  {case:<30} {ms:8.2f} ms")


if __name__ == "__main__":
    main()
