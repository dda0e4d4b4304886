"""Logs say what was recorded (issue 20, defect 10), on both databases: a job whose lease was
lost never logs "succeeded", and ``result_sync()`` inside a running loop is refused at once."""

from __future__ import annotations

import asyncio
import logging

import pytest

import skiplock
from skiplock import Worker


def job_events(caplog: pytest.LogCaptureFixture, job_id: int, attempt: int = 1) -> list[str]:
    """The events logged for one attempt of a job."""
    return [
        str(getattr(r, "event", ""))
        for r in caplog.records
        if r.name == "skiplock.jobs"
        and getattr(r, "job_id", None) == job_id
        and getattr(r, "attempt", None) == attempt
    ]


async def test_a_job_whose_lease_was_lost_logs_no_success(
    app: skiplock.App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="skiplock.jobs")  # started/succeeded are DEBUG
    go = asyncio.Event()

    @app.task(name="stolen")
    async def stolen() -> str:
        await go.wait()
        return "done"

    @app.task(name="kept")
    async def kept() -> str:
        return "done"

    handle = await stolen.aenqueue()
    # a long maintenance interval: no heartbeat notices the theft before the job returns
    worker = Worker(app, maintenance_interval_s=60.0)
    started = worker.signals.started.arm()
    flushed = worker.signals.flushed.arm()
    running = asyncio.create_task(worker.run())
    try:
        assert await started.wait() == handle.id
        assert await app.release_worker(worker.id) == [handle.id]  # another worker's now
        go.set()
        # the refused write's batch (it may also hold a re-claim's release of the same job)
        while handle.id not in await flushed.wait():
            pass
        other = await kept.aenqueue()
        assert await asyncio.wait_for(other.result(), 30) == "done"
    finally:
        worker.request_stop()
        await asyncio.wait_for(running, 30)
    # the first attempt's success was refused by the fence: logged as a lease lost, never as
    # a success (the job, released, may run again here: that attempt is logged as its own)
    assert job_events(caplog, handle.id) == ["started"]
    assert any(f"job {handle.id}: lease lost" in r.getMessage() for r in caplog.records), (
        caplog.text
    )
    assert job_events(caplog, other.id) == ["started", "succeeded"]  # recorded, then logged


async def test_result_sync_inside_a_running_loop_is_refused_at_once(app: skiplock.App) -> None:
    @app.task(name="t")
    async def t() -> None:
        pass

    handle = await t.aenqueue()
    with pytest.raises(skiplock.BlockingCallInLoop, match=r"use await handle\.result\(\)"):
        handle.result_sync(timeout=30)


def test_result_sync_without_a_loop_still_waits(db_url: str) -> None:
    app = skiplock.App(db_url)

    @app.task(name="t")
    def t() -> int:
        return 7

    async def prepare() -> skiplock.JobHandle:
        await app.migrate()
        handle = await t.aenqueue()
        await app.drain()
        await app.close()
        return handle

    handle = asyncio.run(prepare())
    assert handle.result_sync(timeout=30) == 7
