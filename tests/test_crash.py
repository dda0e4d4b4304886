"""Crash recovery with real processes and real signals, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import collections
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import skiplock
from skiplock import JobState

from .apps import crash_app
from .test_cli import Cli

APP = "tests.apps.crash_app:app"
FAST = ("--maintenance-interval", "0.3")
pytestmark = pytest.mark.slow


@pytest.fixture
def cli(db_url: str, tmp_path: Path) -> Iterator[Cli]:
    runner = Cli(db_url, tmp_path, APP)
    yield runner
    runner.stop_all()


@pytest.fixture
async def app(cli: Cli) -> AsyncIterator[skiplock.App]:
    assert cli.run("migrate", APP).returncode == 0
    crash_app.app.url = cli.url
    yield crash_app.app
    await crash_app.app.close()


async def wait_until(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def test_sigkill_mid_batch_loses_nothing(cli: Cli, app: skiplock.App) -> None:
    total = 100
    await app.enqueue_many(crash_app.work.prepare(n, 0.5) for n in range(total))
    first = cli.start(*FAST, "--concurrency", "20")
    await wait_until(
        lambda: sum(ln.startswith("start") for ln in cli.lines()) >= 20,
        30,
        "the first worker to take a batch",
    )
    first.send_signal(signal.SIGKILL)
    first.wait()
    second = cli.start(*FAST, "--concurrency", "20")
    await wait_until(
        lambda: len({ln.split()[1] for ln in cli.lines() if ln.startswith("done")}) >= total,
        60,
        "every job to finish",
    )
    second.send_signal(signal.SIGTERM)  # a clean stop writes every outcome it holds
    assert await asyncio.to_thread(second.wait, 30) == 0
    counts = await app.counts()
    assert counts["succeeded"] == total and counts["running"] == counts["pending"] == 0
    starts = collections.Counter(ln.split()[1] for ln in cli.lines() if ln.startswith("start"))
    duplicates = sum(n - 1 for n in starts.values())
    assert duplicates <= 20  # at most what the killed worker held


async def test_a_job_that_kills_its_worker_ends_dead(cli: Cli, app: skiplock.App) -> None:
    handle = await crash_app.suicide.aenqueue()
    supervisor = cli.start(*FAST, "--processes", "2")
    await wait_until(
        lambda: sum(ln.startswith("suicide") for ln in cli.lines()) >= 3, 60, "three attempts"
    )

    async def dead() -> bool:
        return (await handle.fetch()).state is JobState.DEAD

    deadline = time.monotonic() + 30
    while not await dead():
        assert time.monotonic() < deadline, cli.output()
        await asyncio.sleep(0.2)
    job = await handle.fetch()
    assert job.attempt == 3
    assert "lease expired" in job.errors[-1]["message"]
    assert sum(ln.startswith("suicide") for ln in cli.lines()) == 3
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(30) == 0


async def test_a_revived_worker_cannot_overwrite_the_result(cli: Cli, app: skiplock.App) -> None:
    handle = await crash_app.work.aenqueue(1, 3.0)
    frozen = cli.start(*FAST)
    await wait_until(lambda: any(ln.startswith("start 1") for ln in cli.lines()), 30, "start")
    frozen.send_signal(signal.SIGSTOP)
    try:
        rescuer = cli.start(*FAST)
        await wait_until(
            lambda: sum(ln.startswith("done 1") for ln in cli.lines()) >= 1,
            60,
            "the rescuer to finish the job",
        )
        deadline = time.monotonic() + 30  # the outcome is written just after the handler returns
        while (rescued := await handle.fetch()).state is not JobState.SUCCEEDED:
            assert time.monotonic() < deadline, rescued
            await asyncio.sleep(0.1)
        assert rescued.attempt == 2
    finally:
        frozen.send_signal(signal.SIGCONT)
    # the revived worker is told it lost the lease (by its heartbeat or its outcome's fence)
    await wait_until(lambda: "lease lost" in cli.output(0), 30, "the revived worker's lease lost")
    job = await handle.fetch()
    assert (job.state, job.attempt, job.finished_at) == (JobState.SUCCEEDED, 2, rescued.finished_at)
    for proc in (frozen, rescuer):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
