"""An untimed sync job runs on the worker's threads without an asyncio Task of its own (a
``SyncAttempt``: its thread hands the outcome straight to the runner), and ends as a Task's
attempt does whatever cuts it short: a stop past the grace period, a person's cancel, a lease
lost to another worker, a bug in the worker. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import skiplock
from skiplock import JobState, Worker
from skiplock._worker.runner import Runner

from .helpers import FakeClock


class Gate:
    """A sync task's thread says it started, then waits to be let go (set at the end)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def enter(self) -> None:
        self.started.set()
        self.release.wait(30)

    async def wait_started(self) -> None:
        assert await asyncio.to_thread(self.started.wait, 30), "the sync job never started"


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    try:
        yield g
    finally:
        g.release.set()  # no thread is left waiting after a test


async def test_an_untimed_sync_job_runs_without_a_task_of_its_own(
    app: skiplock.App, gate: Gate
) -> None:
    @app.task(name="waits")
    def waits() -> str:
        gate.enter()
        return "done"

    handle = await waits.aenqueue()
    worker = Worker(app, poll_interval_s=0.05)
    run = asyncio.create_task(worker.run())
    await gate.wait_started()
    # before: a Task a job (skiplock-job-ID), whose coroutines the loop woke twice a job
    assert f"skiplock-job-{handle.id}" not in {t.get_name() for t in asyncio.all_tasks()}
    assert worker.status()["running"] == 1
    gate.release.set()
    assert await handle.result(timeout=30) == "done"
    worker.request_stop()
    await asyncio.wait_for(run, 30)


async def test_a_stop_past_the_grace_releases_a_running_sync_job_and_drops_its_late_return(
    app: skiplock.App, gate: Gate
) -> None:
    runs: list[int] = []

    @app.task(name="outlives")
    def outlives() -> str:
        runs.append(skiplock.current_job().attempt)
        if len(runs) == 1:
            gate.enter()  # the first attempt outlives the worker's grace period
        return "ran"

    handle = await outlives.aenqueue()
    worker = Worker(app, shutdown_timeout_s=0.2, poll_interval_s=0.05)
    run = asyncio.create_task(worker.run())
    await gate.wait_started()
    worker.request_stop()
    await asyncio.wait_for(run, 30)
    job = await handle.fetch()
    assert (job.state, job.attempt, job.errors) == (JobState.PENDING, 0, [])
    gate.release.set()  # its thread returns now: the released job's outcome is not written
    second = Worker(app, poll_interval_s=0.05)
    await asyncio.wait_for(second.run(burst=True), 30)
    job = await handle.fetch()
    assert (job.state, job.attempt, job.result) == (JobState.SUCCEEDED, 1, "ran")
    assert runs == [1, 1]  # the released attempt was given back: the rerun is attempt 1 too


async def test_a_cancel_ends_a_running_sync_job_and_frees_its_slot_at_once(
    app: skiplock.App, gate: Gate
) -> None:
    @app.task(name="stuck")
    def stuck() -> str:
        gate.enter()
        return "too late"

    @app.task(name="next_one")
    def next_one() -> str:
        return "ran beside the stuck thread"

    stuck_handle = await stuck.aenqueue()
    worker = Worker(app, concurrency=1, prefetch=0, poll_interval_s=0.05)
    flushed = worker.signals.flushed.arm()
    run = asyncio.create_task(worker.run())
    await gate.wait_started()
    next_handle = await next_one.aenqueue()
    assert await app.cancel_job(stuck_handle.id, who="ops") is JobState.RUNNING
    while stuck_handle.id not in await flushed.wait():
        pass
    # its thread still waits: the slot went to the next job, on a thread the pool added
    assert await next_handle.result(timeout=30) == "ran beside the stuck thread"
    assert not gate.release.is_set()
    gate.release.set()
    worker.request_stop()
    await asyncio.wait_for(run, 30)
    job = await stuck_handle.fetch()
    assert job.state is JobState.CANCELLED
    assert "cancelled by request" in job.errors[-1]["message"]


async def test_a_lease_lost_while_a_sync_job_runs_ends_its_local_attempt(
    clocked_app: skiplock.App, clock: FakeClock, gate: Gate
) -> None:
    app = clocked_app
    runs: list[int] = []

    @app.task(name="held", visibility_timeout=1)
    def held() -> int:
        attempt = skiplock.current_job().attempt
        runs.append(attempt)
        if attempt == 1:
            gate.enter()  # the lost attempt returns only once the job ran again
        return attempt

    handle = await held.aenqueue()
    worker = Worker(app, poll_interval_s=0.05, maintenance_interval_s=60, shutdown_timeout_s=0)
    lost = worker.signals.lease_lost.arm()
    run = asyncio.create_task(worker.run())
    await gate.wait_started()
    clock.advance(5)  # the lease lapses, and another worker's sweep takes the job
    assert await (await app.backend()).job_reclaim_expired() == [handle.id]
    assert await lost.wait(timeout=30) == handle.id
    # the job runs again (here: its slot was freed at once); the lost attempt's return,
    # once its thread is let go, is not the job's
    assert await handle.result(timeout=30) == 2
    gate.release.set()
    worker.request_stop()
    await asyncio.wait_for(run, 30)
    job = await handle.fetch()
    assert (job.state, job.result, runs) == (JobState.SUCCEEDED, 2, [1, 2])


async def test_a_sync_job_s_outcome_is_decided_where_current_job_is_the_job(
    app: skiplock.App,
) -> None:
    """A retry policy that reads the running job (Django's decided retries do) sees it as a
    Task's does: the outcome is decided in the attempt's own context, not the loop's."""
    seen: list[int] = []

    class ByJob(skiplock.RetryPolicy):
        def delay(self, attempt: int, rng: Any = None) -> float:
            seen.append(skiplock.current_job().id)  # LookupError outside the attempt
            return 0.0

    @app.task(name="fails_once", max_attempts=2, retry=ByJob())
    def fails_once() -> str:
        if skiplock.current_job().attempt == 1:
            raise ValueError("first")
        return "second"

    handle = await fails_once.aenqueue()
    worker = Worker(app, poll_interval_s=0.05)
    await asyncio.wait_for(worker.run(burst=True), 30)
    job = await handle.fetch()
    assert (job.state, job.attempt, job.result, seen) == (JobState.SUCCEEDED, 2, "second", [job.id])


async def test_a_bug_recording_a_sync_job_ends_the_worker_loudly(
    app: skiplock.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    @app.task(name="fine")
    def fine() -> None:
        return None

    def broken(self: Runner, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug in the runner")

    await fine.aenqueue()
    monkeypatch.setattr(Runner, "_record", broken)
    worker = Worker(app, poll_interval_s=0.05)
    with pytest.raises(ExceptionGroup) as raised:  # the worker's TaskGroup's
        await asyncio.wait_for(worker.run(), 30)
    assert "a bug in the runner" in repr(raised.value.exceptions)
