"""A backlog of short jobs, plain and keyed, for the tests that run the CLI worker as users
start it (tests/test_backlog.py): each run records its start and its end."""

from __future__ import annotations

import asyncio

import skiplock

from .recording import record

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test


@app.task(name="nap")
async def nap(n: int) -> None:
    record(f"start {n}")
    await asyncio.sleep(0.01)
    record(f"done {n}")


@app.task(name="keyed_nap", concurrency_key=lambda n: f"tenant:{n % 10}")
async def keyed_nap(n: int) -> None:
    record(f"start {n}")
    await asyncio.sleep(0.01)
    record(f"done {n}")
