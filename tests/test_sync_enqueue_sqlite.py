"""``task.enqueue()`` on SQLite writes in the caller's own thread (no event loop, no hop to the
database thread): the rows of many threads at once, no wait on the app's bridge loop, the
same refusals as every other write (a deleted file, a newer schema), and the connection closed
with the app."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import skiplock
from skiplock import JobState

from .helpers import newer_schema


async def _noop(n: int) -> None:
    pass


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'sync.db'}"
    migrator = skiplock.App(url)

    async def migrate() -> None:
        await migrator.migrate()
        await migrator.close()

    asyncio.run(migrate())
    return url


@pytest.fixture
def app(url: str) -> Iterator[skiplock.App]:
    app = skiplock.App(url)
    yield app
    asyncio.run(app.close())


def test_sync_enqueues_from_many_threads_each_write_their_own_row(app: skiplock.App) -> None:
    noop = app.task(name="noop")(_noop)
    handles: list[list[skiplock.JobHandle]] = [[] for _ in range(8)]

    def enqueue(slot: int) -> None:
        for n in range(100):
            handles[slot].append(noop.enqueue(slot * 1000 + n))

    threads = [threading.Thread(target=enqueue, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ids = [h.id for hs in handles for h in hs]
    assert len(ids) == 800 and len(set(ids)) == 800
    counts = asyncio.run(_counts(app))
    assert counts[JobState.PENDING.value] == 800
    job = asyncio.run(_job(app, handles[3][7].id))
    assert job.args == [3007]


async def _counts(app: skiplock.App) -> dict[str, int]:
    try:
        return await app.counts()
    finally:
        await app.close()


async def _job(app: skiplock.App, job_id: int) -> skiplock.JobRecord:
    try:
        return await app.get_job(job_id)
    finally:
        await app.close()


def test_a_sync_enqueue_does_not_wait_on_the_apps_loop(app: skiplock.App) -> None:
    """Once the first enqueue opened the app (and checked its schema), the next ones never
    touch its bridge loop: with that loop blocked they still return."""
    noop = app.task(name="noop")(_noop)
    noop.enqueue(0)  # the bridge's loop started, the schema checked
    loop = app._sync_loop
    assert loop is not None
    blocked, release = threading.Event(), threading.Event()

    def block() -> None:
        blocked.set()
        release.wait(60)

    loop.call_soon_threadsafe(block)
    assert blocked.wait(10)
    done: list[int] = []
    writer = threading.Thread(target=lambda: done.append(noop.enqueue(1).id))
    try:
        writer.start()
        writer.join(10)
        assert done, "the sync enqueue waited on the app's blocked loop"
    finally:
        release.set()
        writer.join(10)


def test_a_sync_enqueue_refuses_a_deleted_file(app: skiplock.App, url: str) -> None:
    noop = app.task(name="noop")(_noop)
    noop.enqueue(0)
    path = url.removeprefix("sqlite:///")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    with pytest.raises(skiplock.BackendError, match="deleted or replaced"):
        noop.enqueue(1)
    assert not os.path.exists(path)  # nothing made a new, empty database at the path


def test_a_sync_enqueue_refuses_a_newer_schema(url: str) -> None:
    newer_schema(url)
    app = skiplock.App(url)
    noop = app.task(name="noop")(_noop)
    with pytest.raises(skiplock.SchemaError):
        noop.enqueue(0)


def test_closing_the_app_closes_the_sync_connection_and_the_next_enqueue_reopens_it(
    app: skiplock.App,
) -> None:
    noop = app.task(name="noop")(_noop)
    first = noop.enqueue(0)
    here = app._enqueuer._here
    assert here is not None and here[1] is not None
    backend = here[1]
    assert backend._here_conn is not None
    asyncio.run(app.close())
    assert backend._here_conn is None
    assert noop.enqueue(1).id == first.id + 1


def test_one_by_one_enqueues_from_many_connections_never_pass_a_queues_bound(url: str) -> None:
    """A lone job is one statement, its bound's check and its insert together (no BEGIN, no
    separate depth read): eight apps, each its own connection, racing to enqueue into a
    queue bounded at 50 write exactly 50 rows; the rest are refused, each with QueueFull, as
    is one more inside the caller's own transaction."""
    setup = skiplock.App(url)
    asyncio.run(_bound(setup, "bounded", 50))
    apps = [skiplock.App(url) for _ in range(8)]
    tasks = [a.task(name="noop", queue="bounded")(_noop) for a in apps]
    written: list[int] = []
    refused: list[str] = []
    start = threading.Barrier(len(apps))

    def enqueue(slot: int) -> None:
        start.wait(30)
        for n in range(20):
            try:
                written.append(tasks[slot].enqueue(slot * 100 + n).id)
            except skiplock.QueueFull as exc:
                refused.append(str(exc))

    threads = [threading.Thread(target=enqueue, args=(i,)) for i in range(len(apps))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(written) == 50 and len(set(written)) == 50
    assert len(refused) == 110 and all("'bounded' is at its max_depth" in r for r in refused)
    assert asyncio.run(_counts(apps[0]))[JobState.PENDING.value] == 50
    for a in apps[1:]:
        asyncio.run(a.close())

    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    with pytest.raises(skiplock.QueueFull):
        tasks[0].using(connection=conn).enqueue(1)
    conn.execute("ROLLBACK")
    conn.close()


async def _bound(app: skiplock.App, queue: str, depth: int) -> None:
    try:
        await app.set_queue_limits(queue, max_depth=depth, create=True)
    finally:
        await app.close()
