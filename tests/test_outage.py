"""Database outages under a running worker: it logs, backs off, reconnects, and carries on.

These restart the shared test server (through ``conftest.restart_postgres``, which finds the
command: ``SKIPLOCK_TEST_PG_RESTART``, ``pg_ctlcluster`` or ``pg_ctl``). A simulated outage,
which restarts nothing, is in test_outage_recovery.py."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

import skiplock

from .apps import cli_app
from .conftest import PG_URL, restart_postgres
from .helpers import APP, Cli

pytestmark = pytest.mark.slow


async def wait_for(cli: Cli, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(cli.lines()) < count:
        assert time.monotonic() < deadline, cli.output()
        await asyncio.sleep(0.2)


async def wait_for_text(cli: Cli, text: str, count: int, timeout: float) -> None:
    """Until the worker's output says ``text`` at least ``count`` times (its own report of an
    event, not a guess at how long the event takes)."""
    deadline = time.monotonic() + timeout
    while cli.output().count(text) < count:
        assert time.monotonic() < deadline, cli.output()
        await asyncio.sleep(0.2)


SUBSCRIBED = "subscribed to wake-ups"
DOWN, BACK = "database unavailable: ", "database back after "
RESUBSCRIBE_S = 15.0
"""A restart ends and the worker LISTENs again within this: its retries are at most 5 s apart
(they grew to 30 s once, so work could wait that long after the database was back)."""
NO_POLL = ("--poll-interval", "3600")
"""Far longer than any wait below: a job that arrives came through NOTIFY, not the poll."""


async def enqueue_when_up(app: skiplock.App, start: int, n: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            await app.enqueue_many(cli_app.record.prepare(k) for k in range(start, start + n))
            return
        except skiplock.BackendError:
            assert time.monotonic() < deadline
            await app.close()
            await asyncio.sleep(0.5)


@pytest.fixture
def pg_cli(pg_url: str, tmp_path: Path) -> Iterator[Cli]:
    runner = Cli(f"{pg_url}&application_name=victim", tmp_path)
    yield runner
    runner.stop_all()


@pytest.fixture
async def pg_app(pg_cli: Cli, pg_url: str) -> AsyncIterator[skiplock.App]:
    assert pg_cli.run("migrate", APP).returncode == 0
    cli_app.app.url = pg_url
    yield cli_app.app
    await cli_app.app.close()


async def test_postgres_restart_under_a_running_worker(pg_cli: Cli, pg_app: skiplock.App) -> None:
    worker = pg_cli.start(*NO_POLL)  # new jobs must arrive through NOTIFY
    await wait_for_text(pg_cli, SUBSCRIBED, 1, 30)
    await enqueue_when_up(pg_app, 0, 50)
    await wait_for(pg_cli, 50, 30)
    await pg_app.close()
    await restart_postgres()
    # it noticed, backed off and re-LISTENed, seconds after the server was back
    await wait_for_text(pg_cli, SUBSCRIBED, 2, RESUBSCRIBE_S)
    await enqueue_when_up(pg_app, 50, 50)
    await wait_for(pg_cli, 100, 30)
    assert worker.poll() is None, "the worker must carry on"
    out = pg_cli.output()
    assert "LISTEN" in out  # it said it lost and re-established its subscription
    # one line when the outage began and one when it ended, not one (or a traceback) per
    # attempt of each service; a stale pooled connection may make it flap once
    assert 1 <= out.count(DOWN) <= 2 and out.count(BACK) == out.count(DOWN), out
    assert "Traceback" not in out and "retrying in" not in out, out
    worker.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(worker.wait, 30) == 0
    assert (await pg_app.counts())["succeeded"] == 100


async def test_terminated_connections_are_replaced(pg_cli: Cli, pg_app: skiplock.App) -> None:
    worker = pg_cli.start(*NO_POLL)
    await wait_for_text(pg_cli, SUBSCRIBED, 1, 30)
    await enqueue_when_up(pg_app, 0, 20)
    await wait_for(pg_cli, 20, 30)
    conn = await asyncpg.connect(PG_URL)
    try:
        killed = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'victim'"
        )
    finally:
        await conn.close()
    assert killed >= 2  # the pool's connection(s) and the LISTEN connection
    await wait_for_text(pg_cli, SUBSCRIBED, 2, 60)  # re-LISTENed on a new connection
    await enqueue_when_up(pg_app, 20, 20)
    await wait_for(pg_cli, 40, 60)
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(worker.wait, 30) == 0
    assert (await pg_app.counts())["succeeded"] == 40


async def test_a_locked_sqlite_file_is_waited_out(sqlite_url: str, tmp_path: Path) -> None:
    cli = Cli(sqlite_url, tmp_path)
    assert cli.run("migrate", APP).returncode == 0
    cli_app.app.url = sqlite_url
    try:
        worker = cli.start()
        await enqueue_when_up(cli_app.app, 0, 10)
        await wait_for(cli, 10, 30)
        holder = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        # held until the worker's busy_timeout ran out and it reported the outage
        await wait_for_text(cli, DOWN, 1, 60)
        holder.execute("ROLLBACK")
        holder.close()
        await enqueue_when_up(cli_app.app, 10, 10)
        await wait_for(cli, 20, 60)
        assert worker.poll() is None
        await wait_for_text(cli, BACK, 1, 30)
        assert "database is locked" in cli.output()
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(worker.wait, 30) == 0
    finally:
        cli.stop_all()
        await cli_app.app.close()
