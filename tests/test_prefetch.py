"""Claiming ahead (WorkerConfig.prefetch): what a worker holds, and what it gives back.

What a worker holds is read from its own books (running plus claimed ahead): the table's
``running`` count also includes outcomes still on their way to the database.
"""

from __future__ import annotations

import asyncio
import collections

import skiplock
from skiplock import JobState, Worker

from .helpers import await_until, await_until_async


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


async def test_a_backlog_that_turns_slow_is_shared_with_an_idle_worker(app: skiplock.App) -> None:
    """A worker that learned its window on no-ops claims a backlog of slower jobs deep (its
    window is sized at the claim), and its slots, freeing one at a time, never all stay busy
    for a second. Once its mean shows the jobs are slower, it gives back what its slots
    would not start within a second, and a second worker, idle, takes it: both run jobs."""
    first = Worker(app, concurrency=2, poll_interval_s=0.05, name="first")
    second = Worker(app, concurrency=2, poll_interval_s=0.05, name="second")

    @app.task(name="noop")
    async def noop() -> None: ...

    @app.task(name="slow")
    async def slow() -> None:
        await asyncio.sleep(0.1)

    slow_ones = skiplock.JobFilter(task="slow", limit=100)
    running = [asyncio.create_task(first.run())]
    try:
        await app.enqueue_many(noop.prepare() for _ in range(50))
        await await_until(lambda: first.processed == 50, "the no-ops to run")  # its mean
        await app.enqueue_many(slow.prepare() for _ in range(60))
        await await_until(  # the first claims the backlog, deep: its window is a no-op's
            lambda: first.status()["claimed_ahead"] > 20, "the first to claim deep", timeout=10
        )
        running.append(asyncio.create_task(second.run()))
        deadline = asyncio.get_running_loop().time() + 60
        while await app.count_jobs(JobState.SUCCEEDED, slow_ones) < 60:
            assert asyncio.get_running_loop().time() < deadline, "the backlog never drained"
            await asyncio.sleep(0.05)
    finally:
        first.request_stop()
        second.request_stop()
        await asyncio.wait_for(asyncio.gather(*running), timeout=30)
    jobs = await app.list_jobs(where=slow_ones)
    ran = collections.Counter(str(j.worker).split(":")[0] for j in jobs)
    assert [j.state for j in jobs] == [JobState.SUCCEEDED] * 60
    assert ran["second"] >= 10, ran  # without the give-back: 0 (the first held all 60)


async def test_jobs_given_back_keep_their_place_in_line(app: skiplock.App) -> None:
    """A worker gives back what it claimed ahead once its slot has been busy a second; the
    jobs given back were due before those enqueued since, and run before them (a give-back
    that dated them "now" sent them behind: the processes example ran its jobs out of order
    whenever a child's start took that second)."""
    gate = asyncio.Event()
    started = asyncio.Event()
    ran: list[str] = []

    @app.task(name="in_line")
    async def in_line(name: str) -> None:
        ran.append(name)
        if name == "first":
            started.set()
            await gate.wait()

    warm = [f"w{n}" for n in range(5)]  # quick jobs: the adaptive window learns to claim ahead
    await app.enqueue_many(in_line.prepare(n) for n in [*warm, "first", "b", "c", "d"])
    worker = Worker(app, concurrency=1, poll_interval_s=0.05)
    run = asyncio.create_task(worker.run(burst=True))
    await asyncio.wait_for(started.wait(), 30)
    await await_until(lambda: worker.status()["claimed_ahead"] >= 1, "a job claimed ahead")
    await app.enqueue_many(in_line.prepare(n) for n in ("e", "f"))  # due after b, c, d
    await await_until(lambda: worker.status()["claimed_ahead"] == 0, "the give-back")
    await await_until_async(lambda: held_is(app, 1), "the give-back to be written")
    gate.set()
    await asyncio.wait_for(run, 30)
    assert ran == [*warm, "first", "b", "c", "d", "e", "f"]


async def held_is(app: skiplock.App, want: int) -> bool:
    """Whether the rows leased to workers number ``want``."""
    return await held_in_db(app) == want
