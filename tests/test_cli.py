"""The real CLI in subprocesses, with real signals: SQLite file and PostgreSQL alike."""

from __future__ import annotations

import asyncio
import collections
import os
import re
import signal
import time

import pytest

import skiplock
from skiplock import JobState
from skiplock._backends.postgres import statements as postgres_sql
from skiplock._backends.sqlite import migrate as sqlite_sql

from .apps import cli_app
from .helpers import APP, Cli, cli_fixtures

pytestmark = pytest.mark.slow


cli, app = cli_fixtures(cli_app)


def migration_versions(url: str) -> list[int]:
    """Every migration the backend a URL names ships, read from its code, not written here."""
    sql = sqlite_sql if url.startswith("sqlite") else postgres_sql
    return [version for version, _, _ in sql.MIGRATIONS]


async def test_migrate_reports_what_it_did(cli: Cli) -> None:
    first = cli.run("migrate", APP)
    applied = f"applied migrations {migration_versions(cli.url)}"
    assert first.returncode == 0 and applied in first.stdout, first.stdout
    again = cli.run("migrate", APP)
    assert again.returncode == 0 and "up to date" in again.stdout


async def test_bad_app_and_unmigrated_database_are_clear_errors(cli: Cli) -> None:
    bad = cli.run("worker", "tests.apps.nothing_here:app")
    assert bad.returncode == 2 and "cannot import" in bad.stderr
    unmigrated = cli.run("worker", APP, "--burst")
    assert unmigrated.returncode == 2, unmigrated.stderr
    assert "run `skiplock migrate" in unmigrated.stderr
    assert "Traceback" not in unmigrated.stderr and "CRITICAL" not in unmigrated.stderr


async def test_sigterm_lets_running_jobs_finish_then_exits_0(cli: Cli, app: skiplock.App) -> None:
    handle = await cli_app.sleepy.aenqueue(1, 1.0)
    proc = cli.start()
    await asyncio.to_thread(cli.wait_for_line, "start 1")
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 30) == 0, cli.output()
    assert "done 1" in cli.lines()
    assert (await handle.fetch()).state is JobState.SUCCEEDED


async def test_sigterm_past_the_grace_releases_jobs_to_pending(cli: Cli, app: skiplock.App) -> None:
    handle = await cli_app.sleepy.aenqueue(2, 60.0)
    proc = cli.start("--shutdown-timeout", "0.5")
    await asyncio.to_thread(cli.wait_for_line, "start 2")
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 30) == 0, cli.output()
    job = await handle.fetch()
    assert (job.state, job.attempt, job.errors) == (JobState.PENDING, 0, [])
    assert "releasing 1 unfinished jobs" in cli.output()


async def test_a_second_signal_skips_the_drain(cli: Cli, app: skiplock.App) -> None:
    handle = await cli_app.sleepy.aenqueue(3, 60.0)
    proc = cli.start("--shutdown-timeout", "120")
    await asyncio.to_thread(cli.wait_for_line, "start 3")
    proc.send_signal(signal.SIGINT)
    await asyncio.to_thread(cli.wait_for_output, 0, "received SIGINT")  # the first is handled
    proc.send_signal(signal.SIGINT)
    assert await asyncio.to_thread(proc.wait, 30) == 0, cli.output()
    assert (await handle.fetch()).state is JobState.PENDING


@pytest.mark.parametrize(("loop", "expected"), [("uvloop", "uvloop.Loop"), ("asyncio", "asyncio")])
async def test_loop_option_picks_the_event_loop(
    cli: Cli, app: skiplock.App, loop: str, expected: str
) -> None:
    await app.enqueue_many(cli_app.record.prepare(n) for n in range(20))
    proc = cli.start("--loop", loop, "--burst")
    assert await asyncio.to_thread(proc.wait, 30) == 0, cli.output()
    assert f"event loop: {expected}" in cli.output()
    assert (await app.counts())["succeeded"] == 20


async def test_an_idle_worker_wakes_for_another_processes_enqueue(
    cli: Cli, app: skiplock.App
) -> None:
    """PostgreSQL by NOTIFY, SQLite by watching the file: either way, not the 60 s poll (the
    30 s bound is far above a wake-up's milliseconds and still below the poll)."""
    cli.start("--poll-interval", "60")
    # ready: subscribed, and past its first (empty) claim, which must not be what finds the job
    await asyncio.to_thread(cli.wait_for_output, 0, "ready: every service started")
    started = time.monotonic()
    await cli_app.record.aenqueue(7)
    while not any(line.startswith("7 ") for line in cli.lines()):
        assert time.monotonic() - started < 30, cli.output()
        await asyncio.sleep(0.05)


async def test_two_worker_processes_run_every_job_exactly_once(cli: Cli, app: skiplock.App) -> None:
    total = 5000
    procs = [cli.start("--concurrency", "20") for _ in range(2)]
    for i in range(2):
        await asyncio.to_thread(cli.wait_for_output, i, "started")
    await app.enqueue_many(cli_app.record.prepare(n) for n in range(total))
    deadline = time.monotonic() + 120
    while len(cli.lines()) < total:
        assert time.monotonic() < deadline, cli.output()
        await asyncio.sleep(0.2)
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        assert await asyncio.to_thread(proc.wait, 30) == 0
    runs = collections.Counter(line.split()[0] for line in cli.lines())
    assert len(runs) == total and set(runs.values()) == {1}
    if cli.url.startswith("postgresql"):
        # SQLite's busy handler is not fair (a waiting writer sleeps while the other retakes
        # the lock), so only PostgreSQL promises both processes a share.
        pids = {line.split()[2] for line in cli.lines()}
        assert len(pids) == 2, "both processes should have taken a share"
    assert (await app.counts())["succeeded"] == total


async def test_processes_option_supervises_and_forwards_sigterm(
    cli: Cli, app: skiplock.App
) -> None:
    """Two jobs running at once under ``--concurrency 1 --prefetch 0`` prove two processes."""
    handles = [await cli_app.sleepy.aenqueue(n, 60.0) for n in (1, 2)]
    proc = cli.start(
        "--processes", "2", "--concurrency", "1", "--prefetch", "0", "--shutdown-timeout", "0.5"
    )
    await asyncio.to_thread(cli.wait_for_line, "start 1", 30)
    await asyncio.to_thread(cli.wait_for_line, "start 2", 30)
    running = [await h.fetch() for h in handles]
    assert all(j.state is JobState.RUNNING for j in running)
    assert len({j.locked_by for j in running}) == 2, "one process per job"
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 60) == 0, cli.output()
    assert "done 1" not in cli.lines()  # released, not finished: the signal reached both
    assert {(await h.fetch()).state for h in handles} == {JobState.PENDING}


async def test_processes_stop_when_a_child_fails_at_start_up(cli: Cli) -> None:
    """An unmigrated database: restarting cannot help, so no restart loop, one clear error."""
    proc = cli.start("--processes", "2")
    code = await asyncio.to_thread(proc.wait, 30)
    out = cli.output()
    assert code == 2, out
    assert "failed at start-up" in out and "not restarting" in out
    assert out.count("run `skiplock migrate") <= 2, out  # each child tried once at most
    assert "Traceback" not in out


async def test_restarts_of_a_child_that_keeps_dying_back_off(cli: Cli, app: skiplock.App) -> None:
    proc = cli.start("--processes", "2")
    await asyncio.to_thread(cli.wait_for_output, 0, "supervisor started 2 workers")
    victim = int(re.search(r"supervisor started 2 workers: \[(\d+)", cli.output())[1])  # type: ignore[index]
    started = time.monotonic()
    for n, delay in enumerate((1, 2), start=1):
        await asyncio.to_thread(cli.wait_for_output, 0, f"worker {victim} ready")
        os.kill(victim, signal.SIGKILL)
        said = f"worker {victim} was killed by SIGKILL; restarting it in {delay}s"
        await asyncio.to_thread(cli.wait_for_output, 0, f"{said} (restart {n} in a row)")
        while len(restarted := re.findall(r"restarted a worker as (\d+)", cli.output())) < n:
            assert time.monotonic() - started < 30, cli.output()
            await asyncio.sleep(0.05)
        victim = int(restarted[-1])
    assert time.monotonic() - started >= 1 + 2  # the two restarts waited 1 s, then 2 s
    await asyncio.to_thread(cli.wait_for_output, 0, f"worker {victim} ready")
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 30) == 0, cli.output()


async def test_cron_list_shows_each_schedule(cli: Cli) -> None:
    assert cli.run("migrate", "tests.apps.cron_app:app").returncode == 0
    listing = cli.run("cron", "list", "tests.apps.cron_app:app")
    assert listing.returncode == 0, listing.stderr
    out = listing.stdout
    assert "tick" in out and "* * * * * *" in out and "zone UTC" in out
    assert "missed   latest (max_delay 600s)" in out
    assert out.count("  next     ") == 3
    assert "last     never" in out
    assert cli.run("scheduler", APP).returncode == 1  # cli_app declares no schedules
