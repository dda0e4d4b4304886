"""An idle SQLite worker wakes on another process's enqueue through file notifications on the
``-wal`` file, not through a poll: with every poll set to a minute, the job still starts."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

import skiplock
from skiplock import Worker
from skiplock._backends import sqlite as sqlite_backend

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
