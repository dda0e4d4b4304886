"""An app for tests that drive the real CLI in subprocesses.

Tasks append one line per execution to the file named by SKIPLOCK_TEST_LOG (O_APPEND writes
of a short line are atomic), so a test can count exactly how often each job ran.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import skiplock

from .recording import record as _record

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test


@app.task(name="record")
async def record(n: int) -> None:
    _record(f"{n} {skiplock.current_job().id} {os.getpid()}")


@app.task(name="sleepy")
async def sleepy(n: int, seconds: float) -> None:
    _record(f"start {n}")
    await asyncio.sleep(seconds)
    _record(f"done {n}")


@app.task(name="fail", max_attempts=1)
async def fail(reason: str) -> None:
    raise ValueError(reason)


@app.task(name="add")
async def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@app.task(name="add_sync")
def add_sync(a: int, b: int) -> list[int]:
    return [a, b, a + b]


@app.task(name="cancel_me")
async def cancel_me() -> None:
    raise skiplock.Cancel("not wanted")


@app.task(name="flaky", max_attempts=2, retry=skiplock.RetryPolicy(base_s=0.05, jitter=False))
async def flaky(secret: str) -> None:
    """Fails every attempt, quoting its argument in the error (which logs must not carry)."""
    raise ValueError(f"cannot handle {secret}")


@app.task(name="echo")
async def echo(secret: str, *, also: str = "") -> str:
    return secret + also


def _v1_to_v2(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    return [*args, "en"], kwargs


@app.task(name="greet", version=2, upcast={1: _v1_to_v2})
async def greet(name: str, lang: str) -> str:
    """A task at payload version 2 (``job show`` shows the version)."""
    return f"{name}/{lang}"


@app.task(name="approval")
async def approval() -> Any:
    """Parks on the signal ``approved`` (a workflow's wait), then returns its payload."""
    return await skiplock.current_job().wait_for("approved", timeout=3600)


@app.task(name="approval_by")
async def approval_by() -> Any:
    """Takes two signals ``approved`` and returns who sent each (``with_sender``)."""
    job = skiplock.current_job()
    return [(await job.wait_for("approved", with_sender=True)).sender for _ in range(2)]
