"""Jobs a worker claimed ahead (prefetched, leased, not started) are shown as ``claimed``,
apart from ``running``: the worker's heartbeat marks the ones whose code started."""

from __future__ import annotations

import asyncio

import skiplock
from skiplock import Worker


async def test_a_worker_reports_started_jobs_with_its_heartbeat(app: skiplock.App) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    @app.task(name="slow", visibility_timeout=1)
    async def slow() -> None:
        started.set()
        await release.wait()

    await slow.aenqueue()
    worker = Worker(app, poll_interval_s=0.05, concurrency=1)
    beats = worker.signals.heartbeat.arm()
    run = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(started.wait(), 10)
        await beats.wait(timeout=10)  # the first beat after the start marks it
        counts = await app.counts()
        assert (counts["running"], counts["claimed"]) == (1, 0), counts
        (queue,) = [q for q in await app.queues() if q.name == "default"]
        assert (queue.running, queue.claimed) == (1, 0)
        (job,) = await app.list_jobs(skiplock.JobState.RUNNING)
        assert job.started_at is not None and not job.claimed_only
    finally:
        release.set()
        worker.request_stop()
        await asyncio.wait_for(run, 10)
