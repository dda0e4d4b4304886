"""Circuit breakers: a task failing too often within a window is paused everywhere.

Each worker counts its own failures (a task's failures spread over many workers trip later;
docs/design.md). Tripping writes a task pause with an expiry, which every worker's claim
honours, so one worker's verdict stops the task fleet-wide until the cooldown ends.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from datetime import UTC, datetime, timedelta

from .._app import App
from .._backends import Backend
from ..errors import BackendError

log = logging.getLogger("skiplock.worker")


class Breakers:
    """Failure windows per task, and the pauses they trip."""

    def __init__(self, app: App, worker_name: str) -> None:
        self.app = app
        self.worker_name = worker_name
        self._failures: dict[str, collections.deque[float]] = {}
        self._tripping: set[asyncio.Task[None]] = set()

    def count_failure(self, backend: Backend, task_name: str) -> None:
        """Note a failure; pause the task when its window holds ``threshold`` of them."""
        task = self.app.tasks.get(task_name)
        breaker = task.breaker if task else None
        if breaker is None:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        failures = self._failures.setdefault(task_name, collections.deque())
        failures.append(now)
        while failures and failures[0] < now - breaker.window_s:
            failures.popleft()
        if len(failures) < breaker.threshold:
            return
        failures.clear()
        log.error(
            "breaker open for task %s: %d failures within %.0fs; pausing it everywhere for %.0fs",
            task_name,
            breaker.threshold,
            breaker.window_s,
            breaker.cooldown_s,
        )
        trip = loop.create_task(self._trip(backend, task_name, breaker.cooldown_s))
        self._tripping.add(trip)
        trip.add_done_callback(self._tripping.discard)

    async def _trip(self, backend: Backend, task_name: str, cooldown: float) -> None:
        now = self.app.clock() if self.app.clock else datetime.now(UTC)
        until = now + timedelta(seconds=cooldown)
        reason = f"breaker: too many failures (worker {self.worker_name})"
        try:
            await backend.task_pause(task_name, until, reason)
        except BackendError as exc:
            log.warning("could not pause task %s for its breaker (%s)", task_name, exc)
