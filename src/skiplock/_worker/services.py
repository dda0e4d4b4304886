"""A worker's small background services: wake-ups, reclaim, cancellation checks, pruning,
vacuuming the hot rows.

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
from .._backends.base import HotVacuum, JobPruneParams
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
VACUUM_MIN_DEAD = 10_000
"""Dead row versions in the live partition worth a vacuum: at 10,000 jobs a second about a
second's worth, bounding what claims walk past to tens of thousands instead of the hundreds of
thousands a minute of autovacuum's naptime leaves (issue 24)."""
VACUUM_MAX_PAUSE_S = 30.0
"""The longest pause between looks while vacuums remove little (a held horizon)."""


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


class VacuumPace:
    """How long the vacuumer pauses before its next look: ``interval_s`` while vacuums remove
    what they find (or find little), doubling up to VACUUM_MAX_PAUSE_S while one keeps more
    dead versions than it removes (``HotVacuum.held``): an old transaction elsewhere (a long
    report, a ``pg_dump``, a session idle in a transaction) holds the MVCC horizon, no vacuum
    can remove them until it ends, and vacuuming a table that grows with them every second
    would take the claims' CPU for nothing. ``held`` says whether it is backing off."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.pause_s = interval_s

    @property
    def held(self) -> bool:
        return self.pause_s > self.interval_s

    def after(self, done: HotVacuum | None) -> float:
        """The pause after a look that vacuumed (``done``) or found too few to (None)."""
        if done is not None and done.skipped:
            return self.pause_s  # another vacuum is at work: look again after the same pause
        if done is not None and done.held:
            self.pause_s = min(max(self.pause_s * 2, self.interval_s), VACUUM_MAX_PAUSE_S)
        else:
            self.pause_s = self.interval_s
        return self.pause_s


class Vacuumer(Service):
    """Keeps the live jobs' dead row versions few on PostgreSQL (``Backend.hot_vacuum``):
    autovacuum visits a database once a minute, and at thousands of jobs a second the claim
    indexes would fill with dead entries in between. Every worker looks; one vacuums at a
    time (the others skip a table being vacuumed). Logs once when vacuums stop removing
    anything (a held horizon, named so an operator can look for the old transaction) and
    once when they remove again."""

    name = "vacuumer"

    def __init__(
        self, backend: Backend, config: WorkerConfig, outage: Outage | None = None
    ) -> None:
        super().__init__()
        self.backend = backend
        self.pace = VacuumPace(config.vacuum_interval_s)
        self.outage = outage or Outage()
        self.vacuums = 0

    async def serve(self) -> None:
        self.mark_ready()
        pause = self.pace.pause_s
        while True:
            await asyncio.sleep(pause)
            try:
                done = await self.backend.hot_vacuum(VACUUM_MIN_DEAD)
            except BackendUnavailable as exc:
                self.outage.failed(self.name, exc)
                continue
            self.outage.answered()
            pause = self.look(done)

    def look(self, done: HotVacuum | None) -> float:
        """Take in one look's result; the pause before the next."""
        was_held = self.pace.held
        pause = self.pace.after(done)
        if done is not None and not done.skipped:
            self.vacuums += 1
            log.debug(
                "vacuumed the live jobs: %d dead versions, %d left",
                done.dead_before,
                done.dead_after,
            )
        if self.pace.held and not was_held and done is not None:
            if done.kept is not None and done.removed is not None:
                found = f"kept {done.kept} dead row versions it could not remove yet"
                found += f" (removed {done.removed})"
            else:
                found = f"left {done.dead_after} of {done.dead_before} dead row versions"
            log.warning(
                "vacuum of the live jobs %s: an old transaction holds the database's MVCC "
                "horizon (see pg_stat_activity.backend_xmin); claims slow down until it ends",
                found,
            )
        elif was_held and not self.pace.held:
            log.info("vacuum of the live jobs removes dead row versions again")
        return pause
