"""A worker's small background services: wake-ups, reclaim, cancellation checks, pruning.

Each is a ``Service`` run in the worker's TaskGroup; each survives database outages by
reporting them to the worker's shared ``Outage`` (one log line per change, not per attempt)
and retrying (with capped, jittered backoff where it reconnects), and the worker stops them
when it stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from .._backends import Backend
from .._backends.base import JobPruneParams
from .._config import WorkerConfig
from .._job import ReclaimedJob
from .._observe import events
from .._observe.meter import Meter
from .._outage import Outage, retry_delay
from .._service import Service
from ..errors import BackendUnavailable
from .ledger import Ledger
from .runner import Runner
from .signals import WorkerSignals

log = logging.getLogger("skiplock.worker")

PRUNE_BATCH = 1000
PRUNE_MAX_BATCHES = 100
CANCEL_POLL_S = 1.0


class Notifier(Service):
    """Keeps a push subscription alive (re-subscribing after every loss), calling ``on_wake``.

    ``on_wake("*")`` follows every (re)subscription: anything enqueued while we were not
    listening is caught up on at once. Ready after the first attempt, answered or not: the
    poll backstop covers the time it is away.
    """

    name = "notifier"

    def __init__(
        self, backend: Backend, on_wake: Callable[[str], None], outage: Outage | None = None
    ) -> None:
        super().__init__()
        self.backend = backend
        self.on_wake = on_wake
        self.outage = outage or Outage()

    async def serve(self) -> None:
        failures = 0
        while True:
            try:
                async with self.backend.listen(self.on_wake) as lost:
                    failures = 0
                    self.outage.answered()
                    log.info("subscribed to wake-ups; catching up")
                    self.on_wake("*")
                    self.mark_ready()
                    await lost.wait()
                    log.info("lost the LISTEN connection; reconnecting")
            except BackendUnavailable as exc:
                self.mark_ready()
                failures += 1
                self.outage.failed(self.name, exc)
                await asyncio.sleep(retry_delay(failures, first_s=0.5))


class Rescuer(Service):
    """Every ``maintenance_interval_s``, returns rows whose lease expired (anywhere) to pending."""

    name = "rescuer"

    def __init__(
        self,
        backend: Backend,
        config: WorkerConfig,
        signals: WorkerSignals,
        outage: Outage | None = None,
        meter: Meter | None = None,
    ) -> None:
        super().__init__()
        self.meter = meter or Meter()
        self.backend = backend
        self.worker = config.name
        self.interval_s = config.maintenance_interval_s
        self.signals = signals
        self.outage = outage or Outage()

    async def serve(self) -> None:
        self.mark_ready()
        while True:
            await asyncio.sleep(self.interval_s)
            details: list[ReclaimedJob] = []
            try:
                reclaimed = await self.backend.job_reclaim_expired(details)
            except BackendUnavailable as exc:
                self.outage.failed(self.name, exc)
                continue
            self.outage.answered()
            self.meter.reclaim(len(reclaimed))
            for job in details:
                events.reclaimed(job, self.worker)
            self.signals.reclaimed.fire(list(reclaimed))


class Canceller(Service):
    """Cancels, within about a second, running jobs a person asked to cancel."""

    name = "canceller"

    def __init__(
        self,
        backend: Backend,
        runner: Runner,
        ledger: Ledger,
        poll_s: float = CANCEL_POLL_S,
        outage: Outage | None = None,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.runner = runner
        """Told which running jobs a person cancelled (it cancels their tasks)."""
        self.ledger = ledger
        """Read only: which jobs run now."""
        self.poll_s = poll_s
        self.outage = outage or Outage()

    async def serve(self) -> None:
        self.mark_ready()
        while True:
            await asyncio.sleep(self.poll_s)
            running = self.ledger.running_ids()
            if not running:
                continue
            try:
                wanted = await self.backend.job_cancel_requested(running)
            except BackendUnavailable as exc:
                self.outage.failed(self.name, exc)
                continue
            self.outage.answered()
            for job_id in wanted:
                self.runner.cancel_requested(job_id)


class Pruner(Service):
    """Deletes finished rows past their retention, in bounded batches (short locks)."""

    name = "pruner"

    def __init__(
        self, backend: Backend, config: WorkerConfig, outage: Outage | None = None
    ) -> None:
        super().__init__()
        self.backend = backend
        self.config = config
        self.outage = outage or Outage()

    async def serve(self) -> None:
        self.mark_ready()
        while True:
            await asyncio.sleep(self.config.prune_interval_s)
            try:
                removed = await self.prune_once()
            except BackendUnavailable as exc:
                self.outage.failed(self.name, exc)
                continue
            self.outage.answered()
            if removed:
                log.info("pruned %d finished jobs past retention", removed)

    async def prune_once(self) -> int:
        params = JobPruneParams(
            self.config.retention_finished_s, self.config.retention_dead_s, PRUNE_BATCH
        )
        await self.backend.storage_upkeep()  # the next days' partitions, before they are due
        removed = 0
        for _ in range(PRUNE_MAX_BATCHES):
            batch = await self.backend.job_prune(params)
            removed += batch
            if batch < PRUNE_BATCH:
                break
            await asyncio.sleep(0.01)  # let claims in between batches
        return removed
