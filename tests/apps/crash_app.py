"""Tasks for crash tests: they log each start and finish to SKIPLOCK_TEST_LOG."""

from __future__ import annotations

import asyncio
import os

import skiplock

from .recording import record as _record

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test


@app.task(name="work", visibility_timeout=2)
async def work(n: int, seconds: float) -> None:
    _record(f"start {n} {os.getpid()}")
    await asyncio.sleep(seconds)
    _record(f"done {n} {os.getpid()}")


@app.task(name="suicide", visibility_timeout=1, max_attempts=3)
async def suicide() -> None:
    _record(f"suicide {skiplock.current_job().attempt} {os.getpid()}")
    os._exit(7)


@app.task(name="soak", visibility_timeout=5)
async def soak(n: int) -> None:
    _record(f"start {n} {os.getpid()} {skiplock.current_job().id}")
    await asyncio.sleep(0.2)
    _record(f"done {n} {os.getpid()}")


@app.task(name="hold")
async def hold(n: int, seconds: float) -> None:
    """No timeout, no visibility_timeout: the worker's default lease (60 s)."""
    _record(f"start {n} {os.getpid()}")
    await asyncio.sleep(seconds)
    _record(f"done {n} {os.getpid()}")
