"""Sync jobs are timed from when their code starts, and threads that timed-out jobs keep
never make later jobs die unstarted (issue 9, item 4)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

import skiplock
from skiplock import JobState
from skiplock._job import JobContext, set_current_job
from skiplock._worker.executor import _invoke
from skiplock._worker.pool import JobPool
from skiplock._worker.worker import Worker


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of the test, so the threads a test leaves stuck can finish."""
    event = threading.Event()
    yield event
    event.set()


async def test_a_job_queued_behind_a_busy_thread_is_timed_from_its_start(
    app: skiplock.App, release: threading.Event
) -> None:
    @app.task(name="quick", timeout=0.3)
    def quick() -> None:
        pass

    pool = ThreadPoolExecutor(1)
    busy = pool.submit(release.wait, 5)
    try:
        waiting = asyncio.create_task(_invoke(quick, [], {}, 0.3, pool))
        await asyncio.sleep(0.6)  # twice its timeout, queued behind the busy thread
        assert not waiting.done()
        release.set()
        assert await asyncio.wait_for(waiting, 10) == (None, None)  # ran, and succeeded
        busy.result()
    finally:
        pool.shutdown(wait=False)


async def test_a_queued_sync_job_sees_its_deadline_counted_from_its_start(
    app: skiplock.App, release: threading.Event
) -> None:
    seen: list[tuple[datetime, datetime | None]] = []

    @app.task(name="reads_deadline", timeout=5)
    def reads_deadline() -> None:
        seen.append((datetime.now(UTC), skiplock.current_job().deadline))

    pool = ThreadPoolExecutor(1)
    busy = pool.submit(release.wait, 5)
    try:
        now = datetime.now(UTC)
        set_current_job(JobContext(1, "reads_deadline", "default", 1, 1, now, now + _5S, now))
        waiting = asyncio.create_task(_invoke(reads_deadline, [], {}, 5, pool))
        await asyncio.sleep(0.5)  # queued behind the busy thread
        release.set()
        assert await asyncio.wait_for(waiting, 10) == (None, None)
        busy.result()
    finally:
        pool.shutdown(wait=False)
    ((started, deadline),) = seen
    assert deadline is not None and deadline >= started + _5S - timedelta(milliseconds=50)
    assert started - now >= timedelta(seconds=0.4)


_5S = timedelta(seconds=5)


async def test_stuck_threads_do_not_kill_sync_jobs_that_never_ran(
    app: skiplock.App, release: threading.Event, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []

    @app.task(name="stuck", timeout=0.2, max_attempts=1, priority=10)
    def stuck() -> None:
        release.wait(30)

    @app.task(name="quick", timeout=2, max_attempts=1)
    def quick(n: int) -> None:
        ran.append(n)

    stuck_jobs = [await stuck.aenqueue() for _ in range(2)]
    quick_jobs = [await quick.aenqueue(n) for n in range(4)]
    worker = Worker(app, concurrency=2, poll_interval_s=0.05, scheduler=False)
    with caplog.at_level(logging.WARNING, logger="skiplock.worker"):
        await asyncio.wait_for(worker.run(burst=True), 60)
    for handle in stuck_jobs:
        record = await handle.fetch()
        assert record.state is JobState.DEAD and "timed out" in record.errors[-1]["message"]
    for handle in quick_jobs:
        assert (await handle.fetch()).state is JobState.SUCCEEDED
    assert sorted(ran) == [0, 1, 2, 3]
    assert "new sync jobs get a fresh pool" in caplog.text


def test_the_pool_stops_growing_at_its_bound(
    monkeypatch: pytest.MonkeyPatch, release: threading.Event, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("skiplock._worker.pool.MAX_STUCK_THREADS", 2)
    pool = JobPool(1)
    try:
        futures = [pool.submit(release.wait, 30)]
        with caplog.at_level(logging.WARNING, logger="skiplock.worker"):
            for _ in range(3):
                pool.note_stuck(futures[-1])
                futures.append(pool.submit(release.wait, 30))
        assert pool.stuck == 3
        assert caplog.text.count("fresh pool") == 2 and "wait for a free thread" in caplog.text
        assert not futures[-1].running()  # past the bound: it waits behind the stuck thread
        release.set()
        for future in futures:
            future.result(timeout=10)
        assert pool.stuck == 0
    finally:
        pool.shutdown(wait=True)
