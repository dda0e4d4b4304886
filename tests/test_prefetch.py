"""Claiming ahead (WorkerConfig.prefetch): what a worker holds, and what it gives back.

What a worker holds is read from its own books (running plus claimed ahead): the table's
``running`` count also includes outcomes still on their way to the database.
"""

from __future__ import annotations

import asyncio

import skiplock
from skiplock import JobState, Worker


async def held_in_db(app: skiplock.App) -> int:
    """Rows leased to workers (running jobs, jobs claimed ahead, outcomes not yet written)."""
    backend = await app.backend()
    counts = await backend.job_count_by_state(None)
    return counts["running"] + counts["claimed"]  # started or not, each holds a lease


async def run_observing(app: skiplock.App, jobs: int, seconds: float, **options: object) -> int:
    """Drain ``jobs`` jobs that each sleep ``seconds``; the most the worker held (running
    plus claimed ahead) at a job's start or just after a claim. A worker refills its window
    as each slot frees, so the window is full right after a claim, not when the job a slot
    took from it starts."""
    peak = 0
    worker = Worker(app, poll_interval_s=0.05, **options)  # type: ignore[arg-type]

    def look() -> None:
        nonlocal peak
        status = worker.status()
        peak = max(peak, status["running"] + status["claimed_ahead"])

    @app.task(name="observed")
    async def observed() -> None:
        look()
        await asyncio.sleep(seconds)

    async def after_claims() -> None:
        claimed = worker.signals.claimed.arm()
        while True:
            await claimed.wait(timeout=60)
            look()

    await app.enqueue_many(observed.prepare() for _ in range(jobs))
    watcher = asyncio.create_task(after_claims())
    try:
        await asyncio.wait_for(worker.run(burst=True), timeout=60)
    finally:
        watcher.cancel()
    assert worker.processed == jobs
    return peak


async def test_short_jobs_are_claimed_ahead_up_to_the_concurrency(app: skiplock.App) -> None:
    # 0.25 s jobs: the window's Little's-law term (2 slots / 0.25 s x claim time x 2) stays
    # under the concurrency floor unless a claim takes over 125 ms, so a loaded machine's
    # slower claims cannot widen it (at 20 ms jobs a 10 ms claim did, and the test flaked).
    peak = await run_observing(app, jobs=16, seconds=0.25, concurrency=2)
    assert 2 < peak <= 4


async def test_prefetch_zero_never_claims_ahead(app: skiplock.App) -> None:
    assert await run_observing(app, jobs=20, seconds=0.02, concurrency=2, prefetch=0) <= 2


async def test_long_jobs_are_not_claimed_ahead_by_default(app: skiplock.App) -> None:
    # Over a second each on average: a waiting job is better left for an idle worker.
    assert await run_observing(app, jobs=2, seconds=1.05, concurrency=1) == 1


async def test_stop_releases_jobs_claimed_ahead_with_their_attempt(app: skiplock.App) -> None:
    gate = asyncio.Event()

    @app.task(name="gated")
    async def gated() -> None:
        await gate.wait()

    handles = await app.enqueue_many(gated.prepare() for _ in range(6))
    worker = Worker(app, concurrency=1, prefetch=3, poll_interval_s=0.05, shutdown_timeout_s=0.2)
    claimed = worker.signals.claimed.arm()
    run = asyncio.create_task(worker.run())
    held = 0
    while held < 4:  # one running, three waiting for the slot
        held += len(await claimed.wait())
    assert held == await held_in_db(app) == 4
    worker.request_stop()
    await asyncio.wait_for(run, 10)
    jobs = [await h.fetch() for h in handles]
    assert [(j.state, j.attempt, j.errors) for j in jobs] == [(JobState.PENDING, 0, [])] * 6
