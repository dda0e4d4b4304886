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
from skiplock._backends.sqlite import wake as sqlite_backend
from skiplock._backends.sqlite import wake as sqlite_watch

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


def held_watch(
    path: str, woke: asyncio.Event, monkeypatch: pytest.MonkeyPatch, confirm_s: tuple[float, ...]
) -> sqlite_watch.WalWatch:
    monkeypatch.setattr(sqlite_watch, "CONFIRM_S", confirm_s)
    watch = sqlite_watch.open_wal_watch(path, woke.set)
    assert watch is not None
    return watch


def wal_database(path: str) -> sqlite3.Connection:
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA journal_mode = WAL")
    other.execute("CREATE TABLE t (x INTEGER)")
    return other


async def test_a_commit_during_a_long_confirming_pause_is_seen_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hint that announced no visible commit sends the watcher through its schedule of
    pauses; a real commit landing during a long pause must end it, not wait it out (it was
    a sleep: W4 at synchronous=normal had a 6 ms p99 from exactly this).

    Driven through the watcher's one read: the test learns the long pause has begun from
    inside it, and the events that end it are handed over only once the other connection's
    commit has returned (so is visible): the look that follows them must see it. Nothing
    is left to timing (the old version of this test assumed which look came next and lost
    the race about once in a thousand runs)."""
    path = str(tmp_path / "w.db")
    other = wal_database(path)
    woke = asyncio.Event()
    paused, committed = threading.Event(), threading.Event()
    watch = held_watch(path, woke, monkeypatch, (0.0001, 20.0))
    real_read = watch._read
    long_pauses = 0

    def read(timeout_ms: int) -> list[object]:
        nonlocal long_pauses
        if timeout_ms < 10_000:
            return real_read(timeout_ms)
        long_pauses += 1
        if long_pauses > 1:  # the window after the commit: nothing more to wait for
            return real_read(0)
        paused.set()
        events = real_read(timeout_ms)  # a write must end this 20 s wait at once
        committed.wait(10)
        return events

    watch._read = read  # type: ignore[method-assign]
    try:
        # The watcher's own connection's commits never change its data_version: a hint
        # that confirms nothing, so the watcher goes on to its 20 s pause.
        watch._conn.execute("INSERT INTO t VALUES (1)")
        watch._conn.commit()
        assert await asyncio.to_thread(paused.wait, 10), "the watcher never paused long"
        assert not woke.is_set()
        other.execute("INSERT INTO t VALUES (2)")  # a commit by another connection
        committed.set()
        await asyncio.wait_for(woke.wait(), 10)  # well inside the 20 s pause
    finally:
        watch.close()
        other.close()


async def test_a_hint_never_confirmed_ends_its_window_in_a_wake_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WAL write whose commit does not show within the window (here: the watcher's own
    connection, whose commits never move its data_version) still wakes the loop once when
    the window closes, so the claim looks instead of leaving the job to the backstop poll."""
    path = str(tmp_path / "w.db")
    other = wal_database(path)
    woke = asyncio.Event()
    watch = held_watch(path, woke, monkeypatch, (0.0001, 0.0001))
    try:
        watch._conn.execute("INSERT INTO t VALUES (1)")
        watch._conn.commit()
        await asyncio.wait_for(woke.wait(), 10)
    finally:
        watch.close()
        other.close()
