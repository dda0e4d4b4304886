"""The SQLite file deleted or replaced under an open backend: a process that keeps writing to
the inode it opened would work on jobs nobody else can see (and producers would create a
fresh empty file beside it). Every operation checks that the path still names the file it
opened, and refuses loudly; a worker stops with that error."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

import skiplock
from skiplock import Worker
from skiplock._backends.params import JobInsertManyParams

from .helpers import new_job


def remove_database(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@pytest.fixture
async def sqlite_app(tmp_path: Path) -> skiplock.App:
    app = skiplock.App(f"sqlite:///{tmp_path / 'jobs.db'}")
    await app.migrate()
    return app


async def test_a_deleted_file_is_refused_not_written(
    sqlite_app: skiplock.App, tmp_path: Path
) -> None:
    backend = await sqlite_app.backend()
    try:
        await backend.job_insert_many(JobInsertManyParams([new_job()]))
        remove_database(tmp_path / "jobs.db")
        with pytest.raises(skiplock.BackendError, match="deleted or replaced") as raised:
            await backend.job_insert_many(JobInsertManyParams([new_job()]))
        assert not isinstance(raised.value, skiplock.BackendUnavailable)  # not retried
        assert str(tmp_path / "jobs.db") in str(raised.value)
    finally:
        await sqlite_app.close()


async def test_a_replaced_file_is_refused(sqlite_app: skiplock.App, tmp_path: Path) -> None:
    backend = await sqlite_app.backend()
    try:
        remove_database(tmp_path / "jobs.db")
        other = skiplock.App(sqlite_app.url)
        await other.migrate()  # a fresh file at the same path: another inode
        await other.close()
        with pytest.raises(skiplock.BackendError, match="deleted or replaced"):
            await backend.job_count_by_state()
    finally:
        await sqlite_app.close()


async def test_a_worker_stops_loudly_when_its_file_is_deleted(
    sqlite_app: skiplock.App, tmp_path: Path
) -> None:
    worker = Worker(sqlite_app, poll_interval_s=0.05)
    ready = worker.signals.ready.arm()
    run = asyncio.create_task(worker.run())
    try:
        await ready.wait(timeout=10)
        os.unlink(tmp_path / "jobs.db")
        with pytest.raises(BaseException) as raised:
            await asyncio.wait_for(run, 10)
        assert "deleted or replaced" in repr(raised.value), raised.value
    finally:
        run.cancel()
        await sqlite_app.close()


async def test_enqueue_on_a_file_never_migrated_says_run_migrate(tmp_path: Path) -> None:
    app = skiplock.App(f"sqlite:///{tmp_path / 'new.db'}")

    @app.task(name="t")
    async def t() -> None: ...

    try:
        with pytest.raises(skiplock.SchemaError, match="skiplock migrate"):
            await t.aenqueue()
    finally:
        await app.close()
