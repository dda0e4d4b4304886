"""Jobs claimed ahead go back to the table when this worker's jobs turn long, so an idle
worker in another process takes them instead of waiting behind a long job (issue 15)."""

from __future__ import annotations

import asyncio
import time

import pytest

import skiplock

from .apps import crash_app
from .helpers import Cli, await_until, cli_fixtures

APP = "tests.apps.crash_app:app"
pytestmark = pytest.mark.slow


cli, app = cli_fixtures(crash_app, APP)


async def held(app: skiplock.App) -> int:
    counts = await (await app.backend()).job_count_by_state(None)
    return counts["running"] + counts["claimed"]


async def test_a_worker_of_long_jobs_leaves_work_for_an_idle_one(
    cli: Cli, app: skiplock.App
) -> None:
    first = cli.start("--concurrency", "1")
    await app.enqueue_many(crash_app.work.prepare(n, 0) for n in range(20))
    await await_until(lambda: sum(ln.startswith("done") for ln in cli.lines()) == 20, "warm-up", 30)
    # Short jobs so far: the first worker claims ahead, so it takes both long jobs at once.
    await app.enqueue_many(crash_app.work.prepare(n, 60) for n in (100, 101))
    await await_until(
        lambda: any(ln.startswith("start 10") for ln in cli.lines()), "a long job", 30
    )
    deadline = time.monotonic() + 30  # the claim ahead is in the table within moments
    while await held(app) != 2:
        assert time.monotonic() < deadline, "the first worker did not claim the second long job"
        await asyncio.sleep(0.05)
    second = cli.start("--concurrency", "4")

    def taken_by_second() -> bool:
        return any(ln == f"start 10{n} {second.pid}" for ln in cli.lines() for n in (0, 1))

    # Without giving back, the second worker would wait for the first's 60 s job to end.
    await await_until(taken_by_second, "the idle worker to take the job held ahead", 30)
    assert first.poll() is None and second.poll() is None
