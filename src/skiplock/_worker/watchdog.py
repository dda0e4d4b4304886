"""The loop-lag watchdog: names the task that blocks the event loop, and the lease at risk.

An async handler that calls blocking code (``time.sleep``, a synchronous driver) stalls the
whole worker: no heartbeat goes out, and a lease shorter than the stall lapses, so another
worker runs the job again. Nothing on the loop can see that while it happens, so a thread
watches a timestamp the loop refreshes every ``TICK_S``; when it goes stale it logs, once per
stall, the task that is running (``asyncio.current_task`` of the loop: the handler's task is
named ``skiplock-job-<id>``) and the shortest lease this worker holds.

The thread reads the worker's leases only once the loop has missed ``STALL_S`` worth of ticks:
the loop is then stuck inside one task and mutates nothing. Should it resume mid-read, the
read fails with RuntimeError and waits for the next tick.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from .._service import Service

log = logging.getLogger("skiplock.worker")

TICK_S = 0.1
STALL_S = 0.3
"""Lag below this is ordinary scheduling; above it the loop is stuck in one task."""
WARN_S = 1.0
"""A stall this long is always worth a warning, whatever the leases."""

Lease = tuple[int, float]
"""(job id, lease seconds)"""


class Watchdog(Service):
    """Runs a daemon thread while the worker runs; ``shortest_lease`` says the shortest lease
    held now (job id, seconds), or None."""

    name = "watchdog"

    def __init__(self, shortest_lease: Callable[[], Lease | None]) -> None:
        super().__init__()
        self.shortest_lease = shortest_lease
        self._beat = time.monotonic()
        self._done = threading.Event()

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        thread = threading.Thread(
            target=self._watch, args=(loop,), name="skiplock-watchdog", daemon=True
        )
        thread.start()
        try:
            self.mark_ready()
            while True:
                self._beat = time.monotonic()
                await asyncio.sleep(TICK_S)
        finally:
            self._done.set()

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        reported = 0.0
        while not self._done.wait(TICK_S):
            beat = self._beat
            lag = time.monotonic() - beat - TICK_S
            if beat == reported or lag < STALL_S:
                continue
            try:
                shortest = self.shortest_lease()
            except RuntimeError:  # the loop resumed while we read: not stuck after all
                continue
            if lag >= _threshold(shortest):
                reported = beat
                _report(asyncio.current_task(loop), lag, shortest)


def _threshold(shortest: Lease | None) -> float:
    """A third of the shortest lease (one heartbeat interval missed), at most WARN_S."""
    return WARN_S if shortest is None else max(STALL_S, min(WARN_S, shortest[1] / 3))


def _report(task: asyncio.Task[object] | None, lag: float, shortest: Lease | None) -> None:
    culprit = task.get_name() if task is not None else "(no task: a callback)"
    risk = (
        f"; the shortest lease held (job {shortest[0]}, {shortest[1]:.1f}s) lapses if the "
        "stall outlasts it, and another worker runs that job again"
        if shortest
        else ""
    )
    log.warning(
        "event loop blocked for %.1fs (and counting) by %s: an async task is calling "
        "blocking code%s",
        lag,
        culprit,
        risk,
    )
