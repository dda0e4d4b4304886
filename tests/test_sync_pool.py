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
from skiplock._worker.pool import JobPool, Work
from skiplock._worker.worker import Worker

from .helpers import wait_until


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
    assert "new sync jobs get a fresh thread" in caplog.text


def test_the_pool_stops_growing_at_its_bound(
    monkeypatch: pytest.MonkeyPatch, release: threading.Event, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("skiplock._worker.pool.MAX_STUCK_THREADS", 2)
    pool = JobPool(1)
    began: list[threading.Event] = []

    def stuck(began_now: threading.Event) -> None:
        began_now.set()
        release.wait(30)

    def submit() -> Work:
        began.append(threading.Event())
        return pool.submit(stuck, began[-1])

    try:
        works = [submit()]
        with caplog.at_level(logging.WARNING, logger="skiplock.worker"):
            for _ in range(3):
                assert began[-1].wait(10)  # it runs: a thread was there for it
                pool.note_stuck(works[-1])
                works.append(submit())
        assert pool.stuck == 3
        assert caplog.text.count("fresh thread") == 2 and "wait for a free thread" in caplog.text
        assert not began[-1].wait(0.3)  # past the bound: it waits behind the stuck threads
        assert not works[-1].running() and not works[-1].done()
        release.set()
        wait_until(lambda: all(work.done() for work in works), "every job done", timeout=10)
        assert all(event.is_set() for event in began)  # the waiting one ran too
        assert pool.stuck == 0
    finally:
        pool.shutdown(wait=True)


@pytest.fixture
def busy_pool(release: threading.Event) -> Iterator[tuple[JobPool, Work]]:
    """A pool of one thread, that thread running a job until ``release`` is set."""
    pool = JobPool(1)
    began = threading.Event()
    busy = pool.submit(lambda: (began.set(), release.wait(30)))
    assert began.wait(10)
    try:
        yield pool, busy
    finally:
        release.set()
        pool.shutdown(wait=True)


def test_a_stuck_thread_that_returns_retires_and_the_pool_shrinks_back(
    busy_pool: tuple[JobPool, Work], release: threading.Event
) -> None:
    pool, stuck = busy_pool
    pool.note_stuck(stuck)
    ran = threading.Event()
    pool.submit(ran.set)
    assert ran.wait(10)  # a second thread took it while the first is stuck
    release.set()
    wait_until(lambda: stuck.done() and pool.stuck == 0, "the stuck job returned", timeout=10)
    wait_until(lambda: sum(t.is_alive() for t in pool._threads) == 1, "one thread left", 10)
    again = threading.Event()
    pool.submit(again.set)
    assert again.wait(10)


def test_a_job_cancelled_before_its_thread_picks_it_up_never_runs(
    busy_pool: tuple[JobPool, Work], release: threading.Event
) -> None:
    pool, _ = busy_pool
    ran: list[int] = []
    queued = pool.submit(ran.append, 1)
    assert queued.cancel() and queued.done() and not queued.running()
    after = threading.Event()
    pool.submit(after.set)
    release.set()
    assert after.wait(10)
    assert ran == []
