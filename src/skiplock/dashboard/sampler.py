"""The last hour of each queue, for the Overview's sparklines.

Nothing in the database keeps history, so the dashboard process samples it: every
``every_s`` seconds (default 60, so 60 points an hour) it reads each queue's live depth and
its count of finished jobs, and keeps the last hour in memory. Throughput between two samples
is the finished count's rise over the time between them (a prune in between can only lower
the count, so a fall reads as zero). A dashboard that just started shows a short line; two
dashboard processes each keep their own.
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
    """Pending + running (claimed ahead included)."""
    finished: int
    """Succeeded, dead and cancelled rows still kept."""


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
        for name in await self.queue_names():
            counts = await self.app.counts(name)
            finished = counts["succeeded"] + counts["dead"] + counts["cancelled"]
            depth = counts["pending"] + counts["running"]
            points = self.samples.setdefault(name, deque())
            points.append(Sample(now, depth, finished))
            while points and points[0].at < now - HOUR_S:
                points.popleft()

    async def queue_names(self) -> list[str]:
        """Queues with settings or live jobs, the app's tasks' queues, and those sampled."""
        names = {q.name for q in await self.app.queues()}
        names |= {t.queue for t in self.app.tasks.values()} | set(self.samples)
        return sorted(names)

    def depths(self, queue: str) -> list[int]:
        return [s.depth for s in self.samples.get(queue, ())]

    def throughput_per_min(self, queue: str) -> float | None:
        """Finished jobs a minute between the last two samples; None before there are two."""
        points = self.samples.get(queue)
        if not points or len(points) < 2:
            return None
        a, b = points[-2], points[-1]
        return max(0, b.finished - a.finished) * 60.0 / max(b.at - a.at, 1e-9)
