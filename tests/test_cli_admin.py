"""``skiplock queue|task|job|dead`` through the real CLI, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import skiplock
from skiplock import JobState, Worker

from .apps import cli_app
from .test_cli import APP, Cli

pytestmark = pytest.mark.slow


@pytest.fixture
def cli(db_url: str, tmp_path: Path) -> Iterator[Cli]:
    yield Cli(db_url, tmp_path)


@pytest.fixture
async def app(cli: Cli) -> AsyncIterator[skiplock.App]:
    assert cli.run("migrate", APP).returncode == 0
    cli_app.app.url = cli.url
    yield cli_app.app
    await cli_app.app.close()


def ok(result: object) -> str:
    assert result.returncode == 0, (result.stdout, result.stderr)  # type: ignore[attr-defined]
    return str(result.stdout)  # type: ignore[attr-defined]


async def run(cli: Cli, *args: str) -> object:
    return await asyncio.to_thread(cli.run, *args)


async def test_queue_commands(cli: Cli, app: skiplock.App) -> None:
    assert "paused" in ok(await run(cli, "queue", "pause", APP, "default"))
    listing = ok(await run(cli, "queue", "list", APP))
    assert "default" in listing and "paused=yes" in listing
    ok(await run(cli, "queue", "resume", APP, "default"))
    ok(await run(cli, "queue", "limit", APP, "default", "--max-depth", "1", "--rate", "5"))
    await cli_app.record.aenqueue(1)
    with pytest.raises(skiplock.QueueFull):
        await cli_app.record.aenqueue(2)
    assert "max_depth=1" in ok(await run(cli, "queue", "list", APP))
    unknown = await run(cli, "queue", "pause", APP, "nope")
    assert unknown.returncode == 1 and "unknown queue 'nope'" in unknown.stderr  # type: ignore[attr-defined]


async def test_task_commands(cli: Cli, app: skiplock.App) -> None:
    ok(await run(cli, "task", "pause", APP, "record", "--for", "60"))
    assert [p.task for p in await app.task_pauses()] == ["record"]
    assert "resumed" in ok(await run(cli, "task", "resume", APP, "record"))
    unknown = await run(cli, "task", "pause", APP, "nope")
    assert unknown.returncode == 1 and "no task is registered" in unknown.stderr  # type: ignore[attr-defined]


async def test_job_and_dead_letter_commands(cli: Cli, app: skiplock.App) -> None:
    pending = await cli_app.record.aenqueue(1)
    doomed = [await cli_app.fail.aenqueue(f"kaput {n}") for n in range(3)]
    other = await cli_app.fail.aenqueue("different")
    await cli_app.record.using(run_after=__import__("datetime").timedelta(hours=1)).aenqueue(2)
    await Worker(app, poll_interval_s=0.05).run(burst=True)
    assert "kaput 0" in ok(await run(cli, "job", "show", APP, str(doomed[0].id)))
    listing = ok(await run(cli, "dead", "list", APP, "--error", "kaput"))
    assert "3 dead jobs" in listing
    requeued = ok(await run(cli, "dead", "requeue", APP, "--error", "kaput", "--who", "alice"))
    assert "requeued 3 jobs" in requeued
    job = await doomed[0].fetch()
    assert (job.state, job.attempt) == (JobState.PENDING, 0)
    assert job.audit[-1]["who"] == "alice" and job.audit[-1]["what"] == "requeue"
    assert "discarded 1 jobs" in ok(await run(cli, "dead", "discard", APP, str(other.id)))
    assert (await other.fetch()).state is JobState.CANCELLED
    nothing = await run(cli, "dead", "requeue", APP)
    assert nothing.returncode == 2  # a filter or ids are required
    cancelled = ok(await run(cli, "job", "cancel", APP, str(doomed[1].id)))
    assert "cancelled" in cancelled
    assert (await doomed[1].fetch()).state is JobState.CANCELLED
    retried = ok(await run(cli, "job", "retry", APP, str(doomed[1].id)))
    assert "requeued" in retried
    assert (await doomed[1].fetch()).state is JobState.PENDING
    not_final = await run(cli, "job", "retry", APP, str(pending.id))
    assert not_final.returncode == 1
    missing = await run(cli, "job", "show", APP, "999999")
    assert missing.returncode == 1 and "no job with id 999999" in missing.stderr  # type: ignore[attr-defined]
