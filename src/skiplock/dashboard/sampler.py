"""The last hour of each queue, for the Overview's sparklines.

The database keeps no history of depths, so the dashboard process samples it: every
``every_s`` seconds (default 60, so 60 points an hour) it takes one ``app.stats()`` reading
(one query for every queue; several databases: one a database) and keeps, per queue (and
database), the live depth (pending + claimed +
running) and the throughput over the sampling interval, for the last hour, in memory. A
dashboard that just started shows a short line; two dashboard processes each keep their own.
The loop is a detached ``Service`` (the lifecycle every background loop shares): started by
the first request that needs it, stopped with the dashboard's lifespan.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._lanes import DEFAULT
from .._service import Service
from ..errors import BackendUnavailable

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


class Sampler(Service):
    """Samples every queue on its own task, started by the first request that needs it."""

    name = "dashboard sampler"

    def __init__(self, app: App, every_s: float = 60.0) -> None:
        super().__init__()
        self.app = app
        self.every_s = every_s
        self.samples: dict[tuple[str, str], deque[Sample]] = {}
        """By database and queue (a queue may have jobs in several databases)."""

    def ensure_started(self) -> None:
        self.spawn()  # nothing if it runs already

    async def aclose(self) -> None:
        """Stop sampling and wait for the loop to end (the dashboard's shutdown)."""
        self.stop()
        await self.join()

    async def serve(self) -> None:
        while True:
            try:
                await self.sample()
            except Exception:  # a database outage: the gap shows, the sampler goes on
                log.warning("dashboard: sampling the queues failed", exc_info=True)
            self.mark_ready()
            await asyncio.sleep(self.every_s)

    async def sample(self) -> None:
        now = time.time()
        for database in self.databases():
            try:
                stats = await self.app.stats(window_s=max(self.every_s, 1.0), database=database)
                names = await self.queue_names(database)
            except BackendUnavailable:
                if len(self.databases()) == 1:
                    raise
                log.warning("dashboard: sampling database %s failed", database, exc_info=True)
                continue  # several: the others are sampled, this one's line has a gap
            for name in names:
                group = stats.queue(name)
                depth = group.pending + group.claimed + group.running if group else 0
                rate = group.throughput_per_s * 60.0 if group else 0.0
                points = self.samples.setdefault((database, name), deque())
                points.append(Sample(now, depth, rate))
                while points and points[0].at < now - HOUR_S:
                    points.popleft()

    def databases(self) -> list[str]:
        """The App's databases in the order their ids run (one: its own)."""
        directory = self.app.directory
        return sorted(directory.names(), key=directory.number_of)

    async def queue_names(self, database: str = DEFAULT) -> list[str]:
        """``database``'s queues: those with settings or live jobs there, the app's tasks'
        queues whose jobs go there, and those sampled there (one database: every task's)."""
        directory = self.app.directory
        names = {q.name for q in await self.app.queues(database=database)}
        names |= {
            t.queue
            for t in self.app.tasks.values()
            if directory.database_of(directory.lane_for(t.queue, t.lane)) == database
        }
        names |= {name for (where, name) in self.samples if where == database}
        return sorted(names)

    def depths(self, queue: str, database: str = DEFAULT) -> list[int]:
        return [s.depth for s in self.samples.get((database, queue), ())]

    def throughputs(self, queue: str, database: str = DEFAULT) -> list[float]:
        return [s.throughput_per_min for s in self.samples.get((database, queue), ())]
