"""Tasks for the PgBouncer tests: each execution logs its number, job id and wall time."""

from __future__ import annotations

import time

import skiplock

from .recording import record as _record

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test


@app.task(name="stamp")
async def stamp(n: int) -> None:
    _record(f"{n} {skiplock.current_job().id} {time.time()}")
