"""Tasks for workflow crash tests, each logging to SKIPLOCK_TEST_LOG.

With SKIPLOCK_TEST_KILL_AFTER_COMPLETION=1 the worker process SIGKILLs itself the moment a
completion that finished a parent has been written and before its children are released
(PostgreSQL: between the completion statement and the release; SQLite: inside the
completion's transaction, which then never commits): the crash between a member's
completion and its callback that the sweep must make good. A test hook here, in the test's
app, not in skiplock."""

from __future__ import annotations

import os
import signal
from typing import Any

import skiplock
from skiplock._backends.postgres import PostgresBackend
from skiplock._backends.sqlite import SQLiteBackend

from .recording import record as _record

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test


def _die(*_args: Any, **_kwargs: Any) -> Any:
    _record(f"killed {os.getpid()}")
    os.kill(os.getpid(), signal.SIGKILL)


if os.environ.get("SKIPLOCK_TEST_KILL_AFTER_COMPLETION") == "1":
    PostgresBackend._follow_completion = _die  # type: ignore[method-assign]
    SQLiteBackend._follow_completion = _die  # type: ignore[method-assign]


@app.task(name="member", visibility_timeout=2)
async def member(n: int) -> int:
    _record(f"member {n} {os.getpid()}")
    return n


@app.task(name="callback", visibility_timeout=2)
async def callback(results: list[int]) -> int:
    _record(f"callback {sum(results)} {os.getpid()}")
    return sum(results)


@app.task(name="charge_then_crash", visibility_timeout=1, max_attempts=3)
async def charge_then_crash(amount: int) -> str:
    job = skiplock.current_job()

    def charge() -> str:
        _record(f"charged {amount} {os.getpid()}")
        return f"receipt-{amount}"

    receipt = await job.step("charge", charge)
    if job.attempt == 1:  # the step returned and is stored: now the worker dies
        _record(f"crash {os.getpid()}")
        os.kill(os.getpid(), signal.SIGKILL)
    _record(f"shipped {receipt} {os.getpid()}")
    return str(receipt)


@app.task(name="approval", visibility_timeout=2)
async def approval() -> Any:
    job = skiplock.current_job()
    await job.step("asked", _record, f"asked {os.getpid()}")
    payload = await job.wait_for("approved", timeout=3600)
    _record(f"approved {payload} {os.getpid()}")
    return payload


@app.task(name="inbox", visibility_timeout=1, max_attempts=3)
async def inbox() -> list[Any]:
    """A loop over the mailbox ``next``, each message handled in a step; the first run that
    has handled ``b`` kills its worker (a crash in the middle of the loop)."""
    job = skiplock.current_job()
    handled: list[Any] = []
    while (msg := await job.wait_for("next", timeout=3600)) != "stop":
        await job.step("handle", _record, f"handled {msg} {os.getpid()}")
        handled.append(msg)
        if len(handled) > 10:
            raise RuntimeError(f"the loop spins: {handled}")
        if msg == "b" and job.attempt == 1:
            _record(f"crash {os.getpid()}")
            os.kill(os.getpid(), signal.SIGKILL)
    return handled
