"""W16 priority aging (issue 25): a 9:1 high:low priority flood, on PostgreSQL and SQLite.

One in-process worker (``-c 4``, jobs of 20 ms: a drain of at most 200 jobs/s) serves one
queue; a producer enqueues every 50 ms, at 1.2 x the drain, nine jobs of priority 1 for each
of priority 0. So priority 1 alone (1.08 x the drain) keeps the worker busy for ever, and
without aging a priority-0 job runs only when no priority-1 job is ready: never, or by luck.

Why the queue is bounded (``max_depth`` = half an aging step of the drain, 200 jobs; a batch
that would pass it is refused with QueueFull and counted as shed): aging never puts a job
ahead of an *older* job of higher priority, so a low job's wait is at least the time the
backlog ahead of it takes to drain. A flood above the drain with no bound grows that backlog,
and every wait with it, whatever the rule; the bound is the load shedding any such system
needs. With it, a low job waits at most ~one aging step to tie a fresh high job, one more for
the floor, and the bounded backlog (<= one step): the target is ``3 x aging_s + one claim
interval`` (the worker's poll interval).

Measured per run: each job's wait (its handler's start minus its enqueue, wall clock), for
the priority-0 jobs that ran, max and p99; and the priority-0 jobs still pending at the end,
with their wait so far (a starved job's wait is at least that). The same flood without aging
is the contrast.

    .venv/bin/python -m benchmarks.aging              # 10 minutes a run, both databases
    .venv/bin/python -m benchmarks.aging --quick      # 1 minute a run
    .venv/bin/python -m benchmarks.aging --databases sqlite --seconds 30

Results also land in ``benchmarks/results/aging-TIMESTAMP.json``; benchmarks/HISTORY.md, "Many
tenants (issue 25)", W16.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg

import skiplock
from skiplock._job import NewJob

from .common import DEFAULT_PG_URL, percentile

RESULTS = Path(__file__).resolve().parent / "results"
QUEUE = "w16"
CONCURRENCY, JOB_MS = 4, 20.0
DRAIN_PER_S = CONCURRENCY * 1000 / JOB_MS
"""The most the worker can run: its slots over the job time (overheads make it less)."""
OVERLOAD, TICK_S, HIGH_PER_LOW = 1.2, 0.05, 9
AGING_S = 2.0
POLL_S = 0.1
"""The worker's poll interval: the "one claim interval" of the target."""


async def one_run(url: str, *, aging: bool, seconds: float) -> dict[str, Any]:
    app = skiplock.App(url)
    started: dict[int, tuple[int, float, float]] = {}

    @app.task(name="w16", queue=QUEUE)
    async def w16(number: int, priority: int, enqueued: float) -> None:
        started[number] = (priority, enqueued, time.time())
        await asyncio.sleep(JOB_MS / 1000)

    await app.migrate()
    depth = int(DRAIN_PER_S * AGING_S / 2)
    await app.set_queue_limits(
        QUEUE, max_depth=depth, aging_s=AGING_S if aging else None, create=True
    )
    worker = skiplock.Worker(app, concurrency=CONCURRENCY, poll_interval_s=POLL_S, queues=(QUEUE,))
    running = asyncio.create_task(worker.run())
    enqueued: dict[int, tuple[int, float]] = {}
    shed = 0
    try:
        shed = await flood(app, enqueued, seconds)
    finally:
        ended = time.time()
        worker.request_stop()
        await running
        await app.close()
    return report(enqueued, started, ended, shed=shed, aging=aging, depth=depth)


async def flood(app: skiplock.App, enqueued: dict[int, tuple[int, float]], seconds: float) -> int:
    """Enqueue at OVERLOAD x the drain, 9:1, every TICK_S, until ``seconds`` pass; the number
    of jobs refused by the queue's bound."""
    per_tick = OVERLOAD * DRAIN_PER_S * TICK_S
    owed, shed, n = 0.0, 0, 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    while (elapsed := loop.time() - start) < seconds:
        owed += per_tick
        batch = []
        while owed >= 1:
            owed -= 1
            n += 1
            priority = 0 if n % (HIGH_PER_LOW + 1) == 0 else 1
            args = json.dumps([n, priority, time.time()])
            batch.append(NewJob("w16", QUEUE, args, "{}", priority, 1))
        try:
            await app.enqueue_many(batch)
            for job in batch:  # by the producer's number, which the handler records
                number, priority, at = json.loads(job.args_json)
                enqueued[number] = (priority, at)
        except skiplock.QueueFull:
            shed += len(batch)
        await asyncio.sleep(max(0.0, start + elapsed + TICK_S - loop.time()))
    return shed


def report(
    enqueued: dict[int, tuple[int, float]],
    started: dict[int, tuple[int, float, float]],
    ended: float,
    *,
    shed: int,
    aging: bool,
    depth: int,
) -> dict[str, Any]:
    waits = {p: [s - e for q, e, s in started.values() if q == p] for p in (0, 1)}
    starved = [ended - e for i, (p, e) in enqueued.items() if p == 0 and i not in started]
    low = waits[0]
    return {
        "aging_s": AGING_S if aging else None,
        "max_depth": depth,
        "target_s": 3 * AGING_S + POLL_S,
        "enqueued": len(enqueued),
        "shed": shed,
        "ran": len(started),
        "low_ran": len(low),
        "low_wait_max_s": max(low, default=float("nan")),
        "low_wait_p99_s": percentile(low, 99),
        "low_wait_p50_s": percentile(low, 50),
        "high_wait_p99_s": percentile(waits[1], 99),
        "low_left": len(starved),
        "low_left_oldest_s": max(starved, default=0.0),
    }


@contextlib.asynccontextmanager
async def database(kind: str) -> AsyncIterator[str]:
    """A fresh SQLite file or PostgreSQL schema, removed afterwards."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            yield f"sqlite:///{directory}/w16.db"
        return
    schema = f"w16_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(DEFAULT_PG_URL)
    try:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
        yield f"{DEFAULT_PG_URL}?schema={schema}"
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()


def row(db: str, r: dict[str, Any]) -> str:
    aging = f"{r['aging_s']:g} s" if r["aging_s"] else "off"
    # a job still pending at the end counts with its wait so far
    within = max(r["low_wait_max_s"], r["low_left_oldest_s"]) <= r["target_s"]
    return (
        f"| {db} | {aging} | {r['enqueued']:,} | {r['shed']:,} | {r['low_ran']:,} | "
        f"{r['low_wait_p99_s']:.2f} | {r['low_wait_max_s']:.2f} | {r['low_left']:,} | "
        f"{r['low_left_oldest_s']:.1f} | {r['high_wait_p99_s']:.2f} | {r['target_s']:.1f} | "
        f"{'yes' if within else 'no'} |"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 minute a run, not 10")
    parser.add_argument("--seconds", type=float, help="a run's length (overrides --quick)")
    parser.add_argument("--databases", default="postgres,sqlite")
    options = parser.parse_args()
    seconds = options.seconds or (60.0 if options.quick else 600.0)
    results = []
    print(
        "| database | aging | enqueued | shed | low ran | low p99 s | low max s | low left | "
        "oldest left s | high p99 s | target s | within |\n|" + " --- |" * 12
    )
    for db in options.databases.split(","):
        for aging in (True, False):
            async with database(db) as url:
                result = await one_run(url, aging=aging, seconds=seconds)
            results.append({"database": db, "seconds": seconds, **result})
            print(row(db, result), flush=True)
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"aging-{stamp}.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
