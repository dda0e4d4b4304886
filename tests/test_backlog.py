"""A backlog is never idle: a worker with ready jobs and free slots claims again at once.

Written against what users run. A PostgreSQL worker at its defaults once ran 19 of a 200-job
backlog and then idled a whole poll interval, again every poll interval while the backlog
lasted: a claim round that left one slot for the keyed claim came back one short of its
limit and was taken for "drained", and on PostgreSQL nothing wakes a worker when its own jobs
finish. So these tests give the worker a poll interval far longer than the test: all the jobs
must run before its first poll tick. And a claim round is several statements; what the first
committed is run even when a later one fails.
"""

from __future__ import annotations

import asyncio
import collections
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

import skiplock
from skiplock import JobState, Worker
from skiplock.errors import BackendUnavailable

from .apps import backlog_app
from .helpers import PG_URL, Cli, await_until, cli_fixtures

SPEC = "tests.apps.backlog_app:app"
NEVER_S = "600"
"""A poll interval no test here lives to see: a job that waits for the poll fails the test."""

cli, app = cli_fixtures(backlog_app, SPEC)


@pytest.fixture
async def fresh_app(db_url: str) -> AsyncIterator[skiplock.App]:
    """An app of this test's own (the CLI tests' ``app`` is the module's, shared)."""
    the_app = skiplock.App(db_url)
    await the_app.migrate()
    yield the_app
    await the_app.close()


def _done(cli: Cli) -> int:
    return sum(line.startswith("done") for line in cli.lines())


@pytest.mark.slow
@pytest.mark.parametrize("kinds", ["plain", "keyed", "mixed"])
async def test_the_cli_worker_drains_a_backlog_before_its_first_poll(
    cli: Cli, app: skiplock.App, kinds: str
) -> None:
    """`skiplock worker APP --concurrency 20`, every other setting but the poll at its
    default, facing 200 jobs of 10 ms: all of them run long before the first poll tick."""
    plain = {"plain": 200, "keyed": 0, "mixed": 100}[kinds]
    await app.enqueue_many(
        [backlog_app.nap.prepare(n) for n in range(plain)]
        + [backlog_app.keyed_nap.prepare(n) for n in range(plain, 200)]
    )
    worker = cli.start("--concurrency", "20", "--poll-interval", NEVER_S)
    await await_until(lambda: _done(cli) == 200, "all 200 jobs to finish", timeout=60)
    worker.terminate()
    assert await asyncio.to_thread(worker.wait, 30) == 0
    counts = await app.counts()
    assert counts["succeeded"] == 200, counts


async def test_an_in_process_worker_drains_a_backlog_before_its_first_poll(
    fresh_app: skiplock.App,
) -> None:
    app = fresh_app
    task = app.task(name="inproc_nap")(_nap)
    await app.enqueue_many(task.prepare(n) for n in range(200))
    worker = Worker(app, concurrency=20, poll_interval_s=float(NEVER_S))
    flushed = worker.signals.flushed.arm()
    run = asyncio.create_task(worker.run())
    written = 0
    while written < 200:
        written += len(await flushed.wait(timeout=30))
    worker.request_stop()
    await asyncio.wait_for(run, 30)
    assert (await app.counts())["succeeded"] == 200


async def _nap(n: int) -> None:
    await asyncio.sleep(0.01)


def _keyed_claim_fails_once(
    backend: Any, failing: Callable[[Any], Awaitable[Any]], calls: list[str]
) -> None:
    """Put ``failing`` in place of the backend's first keyed claim; the claims made, in
    order, are recorded in ``calls``."""
    ordinary, keyed = backend.job_get_available, backend.job_get_available_keyed

    async def claim(params: Any) -> Any:
        calls.append("ordinary")
        return await ordinary(params)

    async def keyed_once(params: Any) -> Any:
        calls.append("keyed")
        return await (keyed if calls.count("keyed") > 1 else failing)(params)

    backend.job_get_available = claim
    backend.job_get_available_keyed = keyed_once


async def _run_until_all_succeed(worker: Worker, total: int) -> set[int]:
    """Run ``worker`` until ``total`` jobs succeeded; the ids its first claim returned."""
    claimed = worker.signals.claimed.arm()
    flushed = worker.signals.flushed.arm()
    run = asyncio.create_task(worker.run())
    first = set(await claimed.wait(timeout=30))
    written = 0
    while written < total:
        written += len(await flushed.wait(timeout=20))  # a lease is 60 s: far longer
    worker.request_stop()
    await asyncio.wait_for(run, 30)
    return first


async def test_a_claim_round_that_fails_halfway_runs_what_it_claimed(
    fresh_app: skiplock.App,
) -> None:
    """The keyed claim fails after the ordinary one committed: the ordinary claim's jobs run
    at once, in their first attempt, rather than sit out their leases."""
    app = fresh_app
    task = app.task(name="inproc_nap")(_nap)
    await app.enqueue_many(task.prepare(n) for n in range(50))
    backend = await app.backend()

    calls: list[str] = []

    async def outage(params: Any) -> Any:
        calls.append("failed")
        raise BackendUnavailable("job_get_available_keyed: the database went away")

    _keyed_claim_fails_once(backend, outage, calls)
    worker = Worker(app, concurrency=20, poll_interval_s=float(NEVER_S))
    first = await _run_until_all_succeed(worker, 50)
    assert calls[:3] == ["ordinary", "keyed", "failed"]  # the round failed halfway
    assert len(first) == 19  # the ordinary claim's jobs, the one slot left for the keyed
    jobs = [await backend.job_get(i) for i in first]
    assert {(job.state, job.attempt) for job in jobs} == {(JobState.SUCCEEDED, 1)}


async def test_a_session_terminated_between_claim_statements_loses_no_claim(
    pg_url: str,
) -> None:
    """The same on PostgreSQL, the keyed claim's session really terminated by the server:
    the table is locked before it runs, and the session that waits on the lock is ended."""
    name = f"backlog_{uuid.uuid4().hex[:12]}"  # this test's sessions, no one else's
    schema = pg_url.rsplit("schema=", 1)[1]
    app = skiplock.App(f"{pg_url}&application_name={name}")
    await app.migrate()
    try:
        task = app.task(name="nap")(_nap)
        await app.enqueue_many(task.prepare(n) for n in range(50))
        backend = await app.backend()
        keyed = backend.job_get_available_keyed
        calls: list[str] = []

        async def claim_keyed_terminated(params: Any) -> Any:
            admin = await asyncpg.connect(PG_URL)
            try:
                async with admin.transaction():
                    await admin.execute(f'LOCK TABLE "{schema}".skiplock_jobs')
                    claim = asyncio.ensure_future(keyed(params))
                    while not await admin.fetchval(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                        " WHERE application_name = $1 AND wait_event_type = 'Lock'",
                        name,
                    ):
                        await asyncio.sleep(0.01)  # until the claim waits on our lock
            finally:
                await admin.close()
            try:
                return await claim
            except BackendUnavailable:
                calls.append("failed")
                raise

        _keyed_claim_fails_once(backend, claim_keyed_terminated, calls)
        worker = Worker(app, concurrency=20, poll_interval_s=float(NEVER_S))
        first = await _run_until_all_succeed(worker, 50)
        assert calls[:3] == ["ordinary", "keyed", "failed"]
        assert len(first) == 19
        jobs = [await backend.job_get(i) for i in first]
        assert {(job.state, job.attempt) for job in jobs} == {(JobState.SUCCEEDED, 1)}
    finally:
        await app.close()


@pytest.mark.slow
async def test_sessions_terminated_while_a_backlog_drains_strand_no_job(
    pg_url: str, tmp_path: Path
) -> None:
    """The CLI worker at its defaults drains a backlog while every one of its sessions is
    terminated five times a second: every job runs once, in its first attempt (no claim
    is thrown away to sit out its lease), and a pooled connection whose session the server
    ended is never reported as an asyncpg state error."""
    name = f"backlog_{uuid.uuid4().hex[:12]}"
    cli = Cli(f"{pg_url}&application_name={name}", tmp_path, SPEC)
    assert cli.run("migrate", SPEC).returncode == 0
    backlog_app.app.url = cli.url
    try:
        await backlog_app.app.enqueue_many(backlog_app.nap.prepare(n) for n in range(3000))
        worker = cli.start("--concurrency", "20", "--poll-interval", "1")  # the default
        admin = await asyncpg.connect(PG_URL)
        try:
            kills = 0
            while _done(cli) < 3000:
                kills += await admin.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE application_name = $1",
                    name,
                )
                await asyncio.sleep(0.2)  # the cadence of the terminations, not a wait
                assert worker.poll() is None, cli.output()
        finally:
            await admin.close()
        worker.terminate()
        assert await asyncio.to_thread(worker.wait, 30) == 0
        assert kills >= 5
        counts = await backlog_app.app.counts()
        assert counts["succeeded"] == 3000 and counts["running"] == 0, counts
        starts = collections.Counter(ln.split()[1] for ln in cli.lines() if ln.startswith("start"))
        assert len(starts) == 3000 and set(starts.values()) == {1}
        log = cli.output()
        # once "database unavailable: ...: PostgreSQL unavailable: cannot switch to state
        # 12; another operation (2) is in progress", a pooled connection the server had
        # ended: now run again on a fresh one, or named for what it is
        assert "unavailable: cannot switch to state" not in log, log
    finally:
        await backlog_app.app.close()
        cli.stop_all()
