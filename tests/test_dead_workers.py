"""A dead worker's leases come back soon, through the live-worker registry
(``_worker/dead_workers.py``, ``_observe/liveness.py``), and a live worker's never do: real
CLI worker processes and real signals on SQLite and PostgreSQL, with a task whose 300 s timeout
makes a 330 s lease (what a SIGKILLed worker's job used to wait out)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from datetime import timedelta

import skiplock
from skiplock import JobState

from .apps import dead_worker_app
from .helpers import Cli, await_until, cli_fixtures, wait_until

APP = "tests.apps.dead_worker_app:app"
FAST = ("--maintenance-interval", "0.3")
GONE_AFTER_MIN_S = 10.0
"""The silence limit of a worker beating every 0.3 s (``liveness.GONE_AFTER_MIN_S``)."""

cli, app = cli_fixtures(dead_worker_app, APP)


def starts(cli: Cli, n: int) -> list[tuple[int, int]]:
    """(pid, attempt) of every start of job argument ``n``."""
    return [
        (int(pid), int(attempt))
        for kind, arg, pid, attempt in (ln.split() for ln in cli.lines() if ln.startswith("start"))
        if kind == "start" and int(arg) == n
    ]


async def test_a_killed_workers_job_reruns_as_soon_as_a_worker_starts_on_its_host(
    cli: Cli, app: skiplock.App
) -> None:
    """SIGKILL a lone worker mid-job (a 330 s lease) and start another on the same machine:
    it sees the dead worker's process gone in the registry and runs the job again at once."""
    handle = await dead_worker_app.long.aenqueue(1, 300.0)
    first = cli.start(*FAST)
    await await_until(lambda: starts(cli, 1), "the first start", 60)
    first.send_signal(signal.SIGKILL)
    await asyncio.to_thread(first.wait)
    killed_at = time.monotonic()
    second = cli.start(*FAST, "--shutdown-timeout", "1")
    await await_until(lambda: len(starts(cli, 1)) == 2, "the job to run again", 30)
    assert time.monotonic() - killed_at < 30  # not after its 330 s lease
    assert starts(cli, 1) == [(first.pid, 1), (second.pid, 2)]
    job = await handle.fetch()
    assert "exited (its process is gone); reclaimed by worker" in job.errors[-1]["message"]
    assert first.pid not in [w.pid for w in await app.workers()]  # its row is forgotten
    second.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(second.wait, 30) == 0


async def test_a_frozen_workers_jobs_are_taken_after_its_silence_limit(
    cli: Cli, app: skiplock.App
) -> None:
    """A worker that stops beating (SIGSTOP: its process is there, so only its silence can
    tell) loses its 330 s leases to a live worker about ten seconds later, its silence limit,
    not after them. SIGCONT: fencing tells it it lost the job."""
    handle = await dead_worker_app.long.aenqueue(1, 300.0)
    frozen = cli.start(*FAST)
    await await_until(lambda: starts(cli, 1), "the first start", 60)
    rescuer = cli.start(*FAST, "--shutdown-timeout", "1")
    await await_until(
        lambda: "ready: every service started" in cli.output(1), "the second worker", 60
    )
    cli.freeze(frozen)
    frozen_at = time.monotonic()
    try:
        await await_until(lambda: len(starts(cli, 1)) == 2, "the job to run again", 60)
        took = time.monotonic() - frozen_at
        assert GONE_AFTER_MIN_S - 1 < took < 60, took  # its limit, not the 330 s lease
        assert starts(cli, 1)[1] == (rescuer.pid, 2)
        message = (await handle.fetch()).errors[-1]["message"]
        assert "stopped beating (silent" in message and "past its 10s)" in message, message
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    await asyncio.to_thread(cli.wait_for_output, 0, "lease lost")
    for proc in (frozen, rescuer):
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 30) == 0


async def test_a_live_slow_workers_job_is_not_taken(cli: Cli, app: skiplock.App) -> None:
    """A job running past the silence limit on a worker that beats is its worker's: another
    worker looking at the registry every 0.3 s all along takes nothing."""
    seconds = GONE_AFTER_MIN_S + 4
    handle = await dead_worker_app.long.aenqueue(1, seconds)
    slow = cli.start(*FAST)
    await await_until(lambda: starts(cli, 1), "the start", 60)
    watcher = cli.start(*FAST)
    await await_until(lambda: any(ln.startswith("done 1") for ln in cli.lines()), "the end", 60)
    wait = time.monotonic() + 30  # the outcome is written just after the handler returns
    while (job := await handle.fetch()).state is not JobState.SUCCEEDED:
        assert time.monotonic() < wait, job
        await asyncio.sleep(0.05)
    assert (job.attempt, job.errors, starts(cli, 1)) == (1, [], [(slow.pid, 1)])
    # the watcher was there, beating (and so sweeping) past the slow job's silence limit
    (row,) = [w for w in await app.workers() if w.pid == watcher.pid]
    assert job.attempted_at is not None
    assert row.heartbeat_at - job.attempted_at > timedelta(seconds=GONE_AFTER_MIN_S)
    for proc in (slow, watcher):
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 30) == 0


async def test_health_sees_a_killed_worker_dead_at_once(cli: Cli, app: skiplock.App) -> None:
    """On the worker's machine (a container's own probe), ``skiplock health`` knows at once that
    a SIGKILLed worker's process is gone, where it used to read its fresh row as healthy for
    the next minute; ``skiplock workers`` no longer counts it live."""
    worker = cli.start(*FAST)
    wait_until(lambda: cli.run("health", APP).returncode == 0, "healthy", 60)
    worker.send_signal(signal.SIGKILL)
    await asyncio.to_thread(worker.wait)
    answer = cli.run("health", APP)
    assert answer.returncode == 1, answer.stdout
    assert answer.stderr.startswith("unhealthy: no live worker: ")
    assert f"{worker.pid} exited (its process is gone)" in answer.stderr
    listing = json.loads(cli.run("workers", APP, "--json", "--all").stdout)
    assert listing["live"] == 0
    (row,) = listing["workers"]
    assert row["dead"] == "exited (its process is gone)" and row["live"] is False
