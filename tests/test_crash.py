"""Crash recovery with real processes and real signals, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable

import pytest

import skiplock
from skiplock import JobState

from .apps import crash_app
from .helpers import Cli, await_until, cli_fixtures

APP = "tests.apps.crash_app:app"
FAST = ("--maintenance-interval", "0.3")


def freed_at_once(message: str) -> bool:
    """Released by the dead child's supervisor, or by its sibling, which saw on the same
    machine that its process is gone (whichever came first); never a lease's expiry."""
    return "released by its supervisor" in message or "(its process is gone)" in message


pytestmark = pytest.mark.slow


cli, app = cli_fixtures(crash_app, APP)


async def test_sigkill_mid_batch_loses_nothing(cli: Cli, app: skiplock.App) -> None:
    total = 100
    await app.enqueue_many(crash_app.work.prepare(n, 0.5) for n in range(total))
    first = cli.start(*FAST, "--concurrency", "20")
    await await_until(
        lambda: sum(ln.startswith("start") for ln in cli.lines()) >= 20,
        "the first worker to take a batch",
        30,
    )
    first.send_signal(signal.SIGKILL)
    first.wait()
    second = cli.start(*FAST, "--concurrency", "20")
    await await_until(
        lambda: len({ln.split()[1] for ln in cli.lines() if ln.startswith("done")}) >= total,
        "every job to finish",
        60,
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
    await await_until(
        lambda: sum(ln.startswith("suicide") for ln in cli.lines()) >= 3,
        "three attempts",
        60,
    )

    async def dead() -> bool:
        return (await handle.fetch()).state is JobState.DEAD

    deadline = time.monotonic() + 30
    while not await dead():
        assert time.monotonic() < deadline, cli.output()
        await asyncio.sleep(0.2)
    job = await handle.fetch()
    assert job.attempt == 3
    assert freed_at_once(job.errors[-1]["message"])
    assert sum(ln.startswith("suicide") for ln in cli.lines()) == 3
    supervisor.send_signal(signal.SIGTERM)  # often while a crashed child is being restarted
    try:
        code = await asyncio.to_thread(supervisor.wait, 30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the supervisor did not stop: {cli.output()}")
    assert code == 0


async def test_a_killed_childs_leases_are_released_at_once(cli: Cli, app: skiplock.App) -> None:
    """SIGKILL one of two supervised children holding jobs with the default lease (60 s):
    its jobs, started and claimed ahead alike, are pending again within seconds, released by
    the supervisor (a rescuer would write "lease expired", and only after the lease)."""
    handles = [await crash_app.hold.aenqueue(n, 300.0) for n in range(4)]
    supervisor = cli.start(
        *FAST, "--processes", "2", "--concurrency", "2", "--shutdown-timeout", "1"
    )
    await await_until(
        lambda: sum(ln.startswith("start") for ln in cli.lines()) >= 4, "four starts", 60
    )
    victim = int(cli.lines()[0].split()[2])
    registered = {w.pid for w in await app.workers()}
    assert victim in registered  # each child registers before its first claim
    os.kill(victim, signal.SIGKILL)
    killed = {int(ln.split()[1]) for ln in cli.lines() if ln.endswith(f" {victim}")}
    ids = [h.id for h in handles if h.id - handles[0].id in killed]
    assert len(ids) == 2

    async def released() -> bool:
        rows = [await app.get_job(i) for i in ids]
        return all(row.errors and freed_at_once(row.errors[-1]["message"]) for row in rows)

    deadline = time.monotonic() + 40  # inside the 60 s lease (and the message is not the lease's)
    while not await released():
        assert time.monotonic() < deadline, cli.output()
        await asyncio.sleep(0.1)
    for i in ids:
        row = await app.get_job(i)
        assert row.errors[-1]["attempt"] == 1 and row.state in (JobState.PENDING, JobState.RUNNING)
    # the supervisor logs the exit just after the release it waited for: wait for the line
    await await_until(
        lambda: f"worker {victim} was killed by SIGKILL" in cli.output(), "the exit logged"
    )
    # the registry forgets it too: `skiplock workers`, health and the dashboard count the
    # living, not a dead child that beat within the last minute
    assert victim not in [w.pid for w in await app.workers()]
    supervisor.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(supervisor.wait, 30) == 0


async def test_a_killed_childs_jobs_claimed_ahead_are_released_too(
    cli: Cli, app: skiplock.App
) -> None:
    """The innocent batch-mates: one slot and two jobs claimed ahead per child; the SIGKILLed
    child's three rows, the two it never started included, are released by its supervisor
    (a rescuer, after the 60 s lease, would write "lease expired")."""
    await app.enqueue_many(crash_app.hold.prepare(n, 300.0) for n in range(6))
    supervisor = cli.start(
        *FAST, "--processes", "2", "--concurrency", "1", "--prefetch", "2",
        "--shutdown-timeout", "1",
    )  # fmt: skip

    async def held() -> dict[int, str]:
        return {r.id: r.worker or "" for r in await app.list_jobs(JobState.RUNNING)}

    async def wait_for(condition: Callable[[], Awaitable[bool]], what: str) -> None:
        deadline = time.monotonic() + 60
        while not await condition():
            assert time.monotonic() < deadline, f"{what}: {cli.output()}"
            await asyncio.sleep(0.1)

    async def all_claimed() -> bool:
        return len(await held()) == 6 and sum(ln.startswith("start") for ln in cli.lines()) >= 2

    await wait_for(all_claimed, "six jobs claimed, two started")
    victim = int(cli.lines()[0].split()[2])
    ids = sorted(i for i, w in (await held()).items() if w.endswith(f":{victim}"))
    assert len(ids) == 3  # one running, two claimed ahead
    assert sum(ln.endswith(f" {victim}") for ln in cli.lines()) == 1  # one slot
    os.kill(victim, signal.SIGKILL)

    async def released() -> bool:
        rows = [await app.get_job(i) for i in ids]
        return all(r.errors and freed_at_once(r.errors[-1]["message"]) for r in rows)

    await wait_for(released, "the dead child's three jobs released")
    supervisor.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(supervisor.wait, 30) == 0


async def test_a_revived_worker_cannot_overwrite_the_result(cli: Cli, app: skiplock.App) -> None:
    handle = await crash_app.work.aenqueue(1, 3.0)
    frozen = cli.start(*FAST)
    await await_until(lambda: any(ln.startswith("start 1") for ln in cli.lines()), "start", 30)
    cli.freeze(frozen)  # SIGSTOP, never inside its write transaction
    try:
        rescuer = cli.start(*FAST)
        await await_until(
            lambda: sum(ln.startswith("done 1") for ln in cli.lines()) >= 1,
            "the rescuer to finish the job",
            60,
        )
        deadline = time.monotonic() + 30  # the outcome is written just after the handler returns
        while (rescued := await handle.fetch()).state is not JobState.SUCCEEDED:
            assert time.monotonic() < deadline, rescued
            await asyncio.sleep(0.1)
        assert rescued.attempt == 2
    finally:
        frozen.send_signal(signal.SIGCONT)
    # the revived worker is told it lost the lease (by its heartbeat or its outcome's fence)
    await await_until(lambda: "lease lost" in cli.output(0), "the revived worker's lease lost", 30)
    job = await handle.fetch()
    assert (job.state, job.attempt, job.finished_at) == (JobState.SUCCEEDED, 2, rescued.finished_at)
    for proc in (frozen, rescuer):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
