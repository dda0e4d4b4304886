"""The last hour of each queue, for the Overview's sparklines.

The database keeps no history of depths, so the dashboard process samples it: every
``every_s`` seconds (default 60, so 60 points an hour) it takes one ``app.stats()`` reading
(one query for every queue) and keeps, per queue, the live depth (pending + claimed +
running) and the throughput over the sampling interval, for the last hour, in memory. A
dashboard that just started shows a short line; two dashboard processes each keep their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._app import App

log = logging.getLogger("skiplock.dashboard")

HOUR_S = 3600.0


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    depth: int
    """Pending + claimed ahead + running."""
    throughput_per_min: float
    """Jobs finished (any outcome) a minute, over the sampling interval."""


class Sampler:
    """Samples every queue on its own task, started by the first request that needs it."""

    def __init__(self, app: App, every_s: float = 60.0) -> None:
        self.app = app
        self.every_s = every_s
        self.samples: dict[str, deque[Sample]] = {}
        self._task: asyncio.Task[None] | None = None

    def ensure_started(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="skiplock dashboard sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                await self.sample()
            except Exception:  # a database outage: the gap shows, the sampler goes on
                log.warning("dashboard: sampling the queues failed", exc_info=True)
            await asyncio.sleep(self.every_s)

    async def sample(self) -> None:
        now = time.time()
        stats = await self.app.stats(window_s=max(self.every_s, 1.0))
        for name in await self.queue_names():
            group = stats.queue(name)
            depth = group.pending + group.claimed + group.running if group else 0
            rate = group.throughput_per_s * 60.0 if group else 0.0
            points = self.samples.setdefault(name, deque())
            points.append(Sample(now, depth, rate))
            while points and points[0].at < now - HOUR_S:
                points.popleft()

    async def queue_names(self) -> list[str]:
        """Queues with settings or live jobs, the app's tasks' queues, and those sampled."""
        names = {q.name for q in await self.app.queues()}
        names |= {t.queue for t in self.app.tasks.values()} | set(self.samples)
        return sorted(names)

    def depths(self, queue: str) -> list[int]:
        return [s.depth for s in self.samples.get(queue, ())]

    def throughputs(self, queue: str) -> list[float]:
        return [s.throughput_per_min for s in self.samples.get(queue, ())]
