"""An idle SQLite worker wakes on another process's enqueue through file notifications on the
``-wal`` file, not through a poll: with every poll set to a minute, the job still starts."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import skiplock
from skiplock import Worker
from skiplock._backends import sqlite as sqlite_backend
from skiplock._backends import sqlite_watch

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="file notifications (inotify) are Linux-only"
)

ENQUEUE = """
import sys, skiplock
app = skiplock.App(sys.argv[1])
@app.task(name="wake")
async def wake() -> None: ...
wake.enqueue()
"""


async def enqueue_in_another_process(url: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", ENQUEUE, url, stderr=subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()


async def test_another_process_enqueue_wakes_an_idle_worker_without_a_poll(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("WATCH_MIN_S", "WATCH_MAX_S", "WATCH_BACKSTOP_S"):
        monkeypatch.setattr(sqlite_backend, name, 60.0)  # no data_version poll in the wait
    app = skiplock.App(sqlite_url)
    await app.migrate()
    done = asyncio.Event()

    @app.task(name="wake")
    async def wake() -> None:
        done.set()

    worker = Worker(app, poll_interval_s=60)  # and no claim poll either
    claimed, woke = worker.signals.claimed.arm(), worker.signals.woke.arm()
    run = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.ready.wait(), 30)
        assert await claimed.wait(timeout=10) == []  # idle: the first claim found nothing
        woke.drain()  # forget the wake-up that followed subscribing
        await enqueue_in_another_process(sqlite_url)
        assert await woke.wait(timeout=20) == "*"  # the file said so: every queue
        await asyncio.wait_for(done.wait(), 20)
    finally:
        worker.request_stop()
        await asyncio.wait_for(run, 30)
        await app.close()


async def test_a_commit_during_a_long_confirming_pause_is_seen_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hint that announced no visible commit sends the watcher through its schedule of
    pauses; a real commit landing during a long pause must end it, not wait it out (it was
    a sleep: W4 at synchronous=normal had a 6 ms p99 from exactly this)."""
    monkeypatch.setattr(sqlite_watch, "CONFIRM_S", (0.0001, 20.0, 20.0))
    path = str(tmp_path / "w.db")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA journal_mode = WAL")
    other.execute("CREATE TABLE t (x INTEGER)")
    loop = asyncio.get_running_loop()
    woke = asyncio.Event()
    looks: list[float] = []
    paused = threading.Event()  # set by the watcher's second look: its 20 s pause comes next
    watch = sqlite_watch.open_wal_watch(path, woke.set)
    assert watch is not None
    looked = watch._data_version

    def counted() -> int | None:
        looks.append(loop.time())
        version = looked()
        if len(looks) >= 2:
            paused.set()
        return version

    watch._data_version = counted  # type: ignore[method-assign]
    try:
        # The watcher's own connection's commits never change its data_version: a hint
        # that confirms nothing, so the watcher goes on to its 20 s pause.
        watch._conn.execute("INSERT INTO t VALUES (1)")
        watch._conn.commit()
        assert await asyncio.to_thread(paused.wait, 10), "the watcher never looked twice"
        assert not woke.is_set()
        started = loop.time()
        other.execute("INSERT INTO t VALUES (2)")  # a commit by another connection
        await asyncio.wait_for(woke.wait(), 10)  # well inside the 20 s pause
        assert loop.time() - started < 10
    finally:
        watch.close()
        other.close()
