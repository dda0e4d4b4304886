"""The app the workflow benchmark (benchmarks/workflows.py, W17) runs through the CLI.

``register`` puts the tasks on an app: the module's own ``app`` (what ``skiplock worker
benchmarks.workflows_app:app`` loads, its URL from ``SKIPLOCK_DATABASE_URL``) and the bench's,
which enqueues the workflows with the same task names.

The chord test's members and callback append one line each time their code starts to the file
``SKIPLOCK_BENCH_WF_LOG`` names (``O_APPEND``, one ``write`` a line, so lines from several
processes never interleave): an attempt killed with its worker is counted too.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import skiplock

LOG_ENV = "SKIPLOCK_BENCH_WF_LOG"
CHORD_LEASE_S = 2.0
"""The chord test's lease (``visibility_timeout``): a SIGKILLed worker's jobs are reclaimed
this long after its last heartbeat, at the next reclaim pass of a live worker."""


def _log(line: dict[str, Any]) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def register(app: skiplock.App) -> dict[str, Any]:
    """The benchmark's tasks on ``app``, by short name."""

    @app.task(name="wf_warm")
    async def warm() -> None:
        """A worker's first job: it is up and claiming."""

    @app.task(name="wf_noop")
    async def noop(*args: Any) -> None:
        """A no-op (a fan-out child gets its parent's result first, and ignores it)."""

    @app.task(name="wf_sink")
    async def sink(values: list[Any]) -> int:
        """The fan-in's one child: the list of its 9,999 parents' results."""
        return len(values)

    @app.task(name="wf_link")
    async def link(previous: int | list[float]) -> list[float]:
        """A chain's link: the previous link's count plus one, and when this code started
        (wall clock), so the per-link gap can also be read from the handlers' side."""
        started = time.time()
        count = previous if isinstance(previous, int) else int(previous[0])
        return [count + 1, started]

    @app.task(name="wf_member", visibility_timeout=CHORD_LEASE_S)
    async def member(run: int, index: int, ms: float) -> int:
        """A chord member: logs its start, sleeps ``ms``, returns its index."""
        job = skiplock.current_job()
        _log({"kind": "member", "run": run, "index": index, "job": job.id,
              "attempt": job.attempt, "pid": os.getpid(), "at": time.time()})  # fmt: skip
        await asyncio.sleep(ms / 1000)
        return index

    @app.task(name="wf_callback", visibility_timeout=CHORD_LEASE_S)
    async def callback(values: list[int], run: int) -> int:
        """The chord's body: logs that it ran, with what it was given."""
        job = skiplock.current_job()
        _log({"kind": "callback", "run": run, "job": job.id, "attempt": job.attempt,
              "pid": os.getpid(), "at": time.time(), "n": len(values),
              "in_order": values == list(range(len(values)))})  # fmt: skip
        return len(values)

    return {
        "warm": warm,
        "noop": noop,
        "sink": sink,
        "link": link,
        "member": member,
        "callback": callback,
    }


app = skiplock.App()
register(app)
