"""``skiplock health`` and a worker's ``--health-port``: the verdict table, then a real worker
process stopped with SIGSTOP while ready work waits (unhealthy) and resumed with SIGCONT
(healthy again)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time
from datetime import UTC, datetime, timedelta

import pytest

import skiplock
from skiplock import StatsGroup, WorkerInfo
from skiplock._cli.health import problems

from .apps import cli_app
from .helpers import Cli, cli_fixtures, free_port, http_get, wait_until

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def total(backlog_age_s: float) -> StatsGroup:
    zero = {f.name: 0 for f in dataclasses.fields(StatsGroup)}
    return StatsGroup(**(zero | {"name": "", "backlog_age_s": backlog_age_s}))  # type: ignore[arg-type]


def worker(silent_s: float, claimed_ago_s: float | None) -> WorkerInfo:
    beat = NOW - timedelta(seconds=silent_s)
    claim = None if claimed_ago_s is None else NOW - timedelta(seconds=claimed_ago_s)
    return WorkerInfo("w:1", "w", "h", 1, None, 1, 0, 0, NOW, beat, claim, silent_s)


@pytest.mark.parametrize(
    ("backlog_age_s", "workers", "healthy"),
    [
        (0, [], False),  # nobody beating
        (0, [worker(61, 1)], False),  # the only worker is silent past --max-silence
        (0, [worker(5, None)], True),  # beating, nothing old waiting
        (400, [worker(5, 30)], True),  # old work, but claims are flowing (long jobs)
        (400, [worker(5, 90)], False),  # old work and no claim within --max-silence
        (400, [worker(5, None)], False),  # old work and never a claim
        (400, [worker(5, 90), worker(1, 10)], True),  # another worker claims
    ],
)
def test_the_verdict(backlog_age_s: float, workers: list[WorkerInfo], healthy: bool) -> None:
    found = problems(total(backlog_age_s), workers, max_backlog_age_s=300, max_silence_s=60)
    assert (not found) == healthy, found


cli, app = cli_fixtures(cli_app)


@pytest.mark.slow
async def test_health_flips_while_the_only_worker_is_stopped(cli: Cli, app: skiplock.App) -> None:
    port = free_port()
    proc = cli.start("--maintenance-interval", "0.3", "--health-port", str(port))
    probe = ("health", "--url", cli.url, "--max-silence", "2", "--max-backlog-age", "1")

    def healthy() -> bool:
        return cli.run(*probe).returncode == 0

    wait_until(healthy, "healthy once the worker beats")
    wait_until(lambda: http_get(port, "/readyz")[0] == 200, "ready over HTTP")
    assert http_get(port, "/livez")[0] == 200
    cli.freeze(proc)  # SIGSTOP, never inside its write transaction
    try:
        handle = await cli_app.record.aenqueue(1)  # ready work, and nobody to claim it
        wait_until(lambda: not healthy(), "unhealthy with the worker stopped")
        answer = cli.run(*probe)
        assert answer.returncode == 1 and answer.stderr.startswith("unhealthy: ")
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    wait_until(healthy, "healthy again after SIGCONT")
    cli.wait_for_line(f"1 {handle.id} {proc.pid}")  # the resumed worker ran it


@pytest.mark.slow
async def test_the_reclaim_rate_rises_after_a_killed_workers_leases_expire(
    cli: Cli, app: skiplock.App
) -> None:
    before = (await app.stats(window_s=60)).total
    assert (before.reclaims, before.reclaim_rate_per_min) == (0, 0.0)
    handle = await cli_app.sleepy.aenqueue(1, 60)
    lease = ("--default-lease", "1", "--lease-margin", "0")
    first = cli.start(*lease)
    cli.wait_for_line("start 1")
    os.kill(first.pid, signal.SIGKILL)  # its 1 s lease now expires unrenewed
    first.wait()
    cli.start("--maintenance-interval", "0.3")
    until_async = time.monotonic() + 30
    while (await app.stats(window_s=60)).total.reclaims == 0:
        assert time.monotonic() < until_async, "the lease was never reclaimed"
        await asyncio.sleep(0.1)
    after = await app.stats(window_s=60)
    assert after.total.reclaims == 1 and after.total.reclaim_rate_per_min == 1.0
    assert after.queue("default") is not None and after.task("sleepy") is not None
    assert (await app.get_job(handle.id)).attempt >= 1
