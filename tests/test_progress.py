"""Progress: ``current_job().set_progress`` stored with the heartbeat, never a round trip a call."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime

import pytest

import skiplock
from skiplock import Worker, current_job
from skiplock._job import JobContext
from skiplock._worker.progress import PROGRESS_INTERVAL_S

from .helpers import running


async def test_progress_is_written_with_the_next_heartbeat_and_read_from_the_handle(
    app: skiplock.App,
) -> None:
    gate = asyncio.Event()

    @app.task(name="long")
    async def long() -> str:
        await current_job().set_progress(0.5, message="halfway")
        await gate.wait()
        return "ok"

    handle = await long.aenqueue()
    worker = Worker(app, poll_interval_s=0.05)
    beats = worker.signals.heartbeat.arm()
    run = asyncio.create_task(worker.run())
    try:
        await beats.wait(timeout=10)  # the default lease beats every 10 s: progress brings it on
        progress = await handle.progress()
        assert progress is not None
        assert (progress["fraction"], progress["message"]) == (0.5, "halfway")
        assert datetime.fromisoformat(progress["at"]) <= datetime.now(UTC)
        gate.set()
        assert await handle.result(timeout=20) == "ok"
    finally:
        worker.request_stop()
        await asyncio.wait_for(run, timeout=30)


async def test_many_calls_cost_at_most_a_beat_a_second(app: skiplock.App) -> None:
    """200 calls over ~1 s: a handful of heartbeat statements, and the last record wins
    (written with the outcome when the job ends between beats). The bound is counted from
    the job's own length, so a loaded machine that stretches the calls cannot fail it."""
    took: list[float] = []

    @app.task(name="chatty")
    async def chatty() -> None:
        began = time.monotonic()
        for i in range(1, 201):
            await current_job().set_progress(i / 200, message=f"step {i}")
            await asyncio.sleep(0.005)
        took.append(time.monotonic() - began)

    handle = await chatty.aenqueue()
    async with running(app) as worker:
        beats = worker.signals.heartbeat.arm()
        await handle.result(timeout=30)
        count = len(beats.drain())
    (seconds,) = took
    assert 1 <= count <= math.ceil(seconds / PROGRESS_INTERVAL_S) + 2 < 50, (count, seconds)
    progress = await handle.progress()
    assert progress is not None and progress["fraction"] == 1.0
    assert progress["message"] == "step 200"


async def test_a_sync_task_reports_from_its_thread(app: skiplock.App) -> None:
    @app.task(name="sync_progress")
    def sync_progress() -> int:
        current_job().set_progress_sync(1, "all done")
        return 1

    handle = await sync_progress.aenqueue()
    async with running(app):
        assert await handle.result(timeout=20) == 1
    record = await handle.fetch()
    assert record.progress is not None and record.progress["message"] == "all done"


@pytest.mark.parametrize(
    ("fraction", "message", "named"),
    [
        (1.5, "", "fraction"),
        (-0.1, "", "fraction"),
        (float("nan"), "", "fraction"),
        ("half", "", "fraction"),
        (True, "", "fraction"),
        (0.5, "x" * 1001, "message"),
        (0.5, 3, "message"),
    ],
)
def test_progress_values_are_checked_naming_the_option(
    fraction: object, message: object, named: str
) -> None:
    now = datetime.now(UTC)
    ctx = JobContext(1, "t", "q", 1, 1, now, None, now, report=lambda _i, _r: None)
    with pytest.raises(skiplock.ConfigurationError, match=named):
        ctx.set_progress_sync(fraction, message)  # type: ignore[arg-type]
