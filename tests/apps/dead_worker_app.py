"""Tasks for the tests of dead workers and their supervisors (tests/test_dead_workers.py,
tests/test_orphans.py): each start and end is a line in SKIPLOCK_TEST_LOG."""

from __future__ import annotations

import asyncio
import os

import skiplock

from .recording import record as _record

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test


@app.task(name="long", timeout=300)
async def long(n: int, seconds: float) -> None:
    """A 300 s timeout: its lease is 330 s, what a dead worker's job used to wait out."""
    _record(f"start {n} {os.getpid()} {skiplock.current_job().attempt}")
    await asyncio.sleep(seconds)
    _record(f"done {n} {os.getpid()}")


@app.task(name="crash", max_attempts=3)
async def crash() -> None:
    """Kills its worker on every attempt: a supervisor restarting it is in a crash loop."""
    _record(f"crash {skiplock.current_job().attempt} {os.getpid()}")
    os._exit(7)
