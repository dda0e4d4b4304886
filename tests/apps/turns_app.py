"""An app for the concurrency-key tests that run the real CLI worker (tests/test_key_turns.py).

Each job writes ``start TENANT ID`` to SKIPLOCK_TEST_LOG as it starts (O_APPEND: one line a
start, in start order), then works a few milliseconds, a different time for each ``n``.
"""

from __future__ import annotations

import asyncio

import skiplock

from .recording import record

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test


@app.task(name="tenant_work", concurrency_key=lambda tenant, n: tenant)
async def tenant_work(tenant: str, n: int) -> None:
    record(f"start {tenant} {skiplock.current_job().id}")
    await asyncio.sleep((n % 4 + 1) / 1000)  # the job's own work: 1 to 4 ms
