"""The database-derived gauges of a worker's ``/metrics``: one worker computes them, every few
seconds, and the others export none, so N workers scraped every 15 s cost one reading per
refresh, not N.

The one is chosen through the live-worker registry, with no lock and no extra table: among the
workers whose last beat is recent, the one with the smallest id. Every worker reads the
registry (a few rows) each refresh and knows whether it is that one; when it stops, its row
goes and the next smallest takes over within a refresh. Two may briefly both compute while
the registry changes, which costs a second reading, never a wrong number.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from typing import Protocol

from .._job import WorkerInfo
from .._lanes import Directory
from .._outage import Outage
from .._service import Service
from ..errors import BackendUnavailable
from .liveness import dead_reason
from .stats import Stats

log = logging.getLogger("skiplock.worker")

DEFAULT_REFRESH_S = 5.0
"""How often the gauges are recomputed (by one worker), in seconds."""
DEFAULT_WINDOW_S = 300.0
"""The window of the rates, latencies and counts among them."""


class GaugeCache:
    """The last reading a process holds for its ``/metrics``, and whose it is to compute."""

    def __init__(self, window_s: float = DEFAULT_WINDOW_S) -> None:
        self.window_s = window_s
        self.readings: tuple[Stats, ...] = ()
        """Each database's reading, in the order their ids run (one: a one-database App's)."""
        self.several = False
        """The App has several databases: each gauge read from them carries a ``database``
        label (one database: no such label, the series as they always were)."""
        self.workers: list[WorkerInfo] = []
        self.leader = False
        self.read_at: float | None = None
        """``time.monotonic()`` of the last reading (None: never)."""

    @property
    def stats(self) -> Stats | None:
        """The first database's reading (the App's own), or None: none read here."""
        return self.readings[0] if self.readings else None

    @stats.setter
    def stats(self, stats: Stats | None) -> None:
        self.readings = () if stats is None else (stats,)

    def age_s(self) -> float | None:
        if self.read_at is None:
            return None
        return time.monotonic() - self.read_at


def live_workers(workers: list[WorkerInfo], silent_s: float) -> list[WorkerInfo]:
    """The workers that beat within ``silent_s`` and are not known dead (``liveness``)."""
    return [w for w in workers if w.silent_s <= silent_s and dead_reason(w) is None]


class HealthReads(Protocol):
    """The reads the gauges make (``App`` and ``_app_observe.Observe`` answer them), and the
    databases they are made of."""

    async def workers(self, *, database: str | None = ...) -> list[WorkerInfo]: ...

    async def stats(self, *, window_s: float, database: str = ...) -> Stats: ...

    @property
    def directory(self) -> Directory: ...


async def read_workers(reads: HealthReads) -> list[WorkerInfo]:
    """Every database's registry (``read_stats``' rule: one that cannot be read is left out,
    logged, when there are several; one database's failure is the reading's)."""
    directory = reads.directory
    if not directory.several:
        return await reads.workers()
    found: list[WorkerInfo] = []
    for name in sorted(directory.names(), key=directory.number_of):
        try:
            found += await reads.workers(database=name)
        except BackendUnavailable as exc:
            log.warning("metrics: database %s's workers not read: %s", name, exc)
    return found


async def read_stats(reads: HealthReads, window_s: float) -> tuple[Stats, ...]:
    """Every database's reading, in the order their ids run. One database: its reading, as
    ever. Several: one that cannot be read is left out (logged), so its series go absent
    while the others' stay: an outage of one database does not blind the metrics of all."""
    directory = reads.directory
    if not directory.several:
        return (await reads.stats(window_s=window_s),)
    found: list[Stats] = []
    for name in sorted(directory.names(), key=directory.number_of):
        try:
            found.append(await reads.stats(window_s=window_s, database=name))
        except BackendUnavailable as exc:
            log.warning("metrics: database %s not read: %s", name, exc)
    return tuple(found)


class Gauges(Service):
    """Every ``refresh_s``: read the registry; if this worker leads, read the health numbers."""

    name = "gauges"

    def __init__(
        self,
        reads: HealthReads,
        worker_id: str | Callable[[], Collection[str]],
        cache: GaugeCache,
        refresh_s: float = DEFAULT_REFRESH_S,
        silent_s: float = 15.0,
        outage: Outage | None = None,
    ) -> None:
        super().__init__()
        self.reads = reads
        self.worker_id = worker_id
        """This worker's registry id; or, for a process serving several databases, what
        gives the ids its per-database workers beat with (it leads if one of them does)."""
        self.cache = cache
        self.refresh_s = refresh_s
        self.silent_s = silent_s
        """A worker silent longer than this cannot lead (three maintenance beats)."""
        self.outage = outage or Outage()

    async def refresh(self) -> None:
        mine = {self.worker_id} if isinstance(self.worker_id, str) else set(self.worker_id())
        workers = await read_workers(self.reads)
        live = live_workers(workers, self.silent_s)
        leader = min((w.id for w in live), default=None)
        self.cache.leader = leader in mine if leader is not None else bool(mine)
        self.cache.workers = live
        self.cache.several = self.reads.directory.several
        if self.cache.leader:
            self.cache.readings = await read_stats(self.reads, self.cache.window_s)
        else:
            self.cache.readings = ()
        self.cache.read_at = time.monotonic()

    async def serve(self) -> None:
        while True:
            try:
                await self.refresh()
            except BackendUnavailable as exc:
                self.outage.failed(self.name, exc)
            else:
                self.outage.answered()
            self.mark_ready()
            await asyncio.sleep(self.refresh_s)
