"""The app the W5 benchmark runs through the CLI.

    SKIPLOCK_DATABASE_URL=postgresql://... skiplock worker benchmarks.skiplock_app:app \\
        --processes 4 --burst --log-level warning

The task names match ``benchmarks/adapters.py``, which queues the jobs.
"""

from __future__ import annotations

import asyncio

import skiplock

app = skiplock.App()


@app.task(name="noop")
async def noop() -> None:
    pass


@app.task(name="sleep")
async def sleep() -> None:
    await asyncio.sleep(0.01)
