"""Circuit breakers: a task failing too often within a window is paused everywhere.

Each worker counts its own failures (a task's failures spread over many workers trip later;
docs/design.md). Tripping writes a task pause with an expiry, which every worker's claim
honours, so one worker's verdict stops the task fleet-wide until the cooldown ends. The write
runs as a task of the worker's TaskGroup (``spawn``), never an unowned one.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from .._backends import Backend
from .._backends.params import TaskPauseParams
from .._registry import Registry
from ..errors import BackendError
from .signals import WorkerSignals

Spawn = Callable[[Coroutine[Any, Any, None]], object]

log = logging.getLogger("skiplock.worker")


class Breakers:
    """Failure windows per task, and the pauses they trip."""

    def __init__(
        self,
        registry: Registry,
        worker_name: str,
        backend: Backend,
        spawn: Spawn,
        signals: WorkerSignals,
    ) -> None:
        self.registry = registry
        self.worker_name = worker_name
        self._backend = backend
        self._spawn = spawn
        self._signals = signals
        self._failures: dict[str, collections.deque[float]] = {}

    def count_failure(self, task_name: str) -> None:
        """Note a failure; pause the task when its window holds ``threshold`` of them."""
        task = self.registry.tasks.get(task_name)
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
        self._spawn(self._trip(self._backend, task_name, breaker.cooldown_s))

    async def _trip(self, backend: Backend, task_name: str, cooldown: float) -> None:
        reason = f"breaker: too many failures (worker {self.worker_name})"
        try:
            await backend.task_pause(TaskPauseParams(task_name, reason, cooldown))
            self._signals.breaker_tripped.fire(task_name)
        except BackendError as exc:
            log.warning("could not pause task %s for its breaker (%s)", task_name, exc)
