"""The scheduler: enqueues cron slots, exactly once per slot across any number of processes.

It never runs jobs, so a long job cannot delay it. It sleeps until the earliest next slot
(computed from the schedule, never ``sleep(period)`` after the work), then claims every due
slot through the backend, where a unique (schedule, slot) row and the job's insert share one
transaction: the database picks one winner, with no leader election and no lock to hold.

Slots that came due while this scheduler was running are all enqueued (at most
``max_catchup`` per schedule if it stalled). Slots that passed before it started, and that no
other scheduler claimed, are "missed" and follow the schedule's ``missed`` policy.

Inside a worker it is one of the worker's services (``_service.Service``), ready once its
first round of claims is done; ``skiplock scheduler`` runs it alone through ``run``. It reads
the schedules and the clock from the app's ``Registry``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from .._backends import Backend
from .._backends.params import CronSlotClaimParams
from .._job import SlotOutcome
from .._outage import Outage, retry_delay
from .._registry import Registry
from .._schedule import MAX_LOOKBACK, Schedule
from .._service import Service
from ..errors import BackendUnavailable
from .signals import WorkerSignals

log = logging.getLogger("skiplock.scheduler")

MAX_SLEEP_S = 60.0
"""The longest single sleep: a wall-clock jump is noticed within a minute."""
SLOT_RETENTION = MAX_LOOKBACK
PRUNE_EVERY_S = 3600.0
RETRY_FIRST_S = 1.0
RETRY_CAP_S = 30.0


class Scheduler(Service):
    name = "scheduler"

    def __init__(
        self,
        registry: Registry,
        backend: Backend,
        clock: Callable[[], datetime] | None = None,
        signals: WorkerSignals | None = None,
        outage: Outage | None = None,
        owns: Callable[[Schedule], bool] | None = None,
    ) -> None:
        super().__init__()
        self._owns = owns
        """Which schedules are this database's (None: all): with several databases each
        schedule is one database's, so each slot runs once across them."""
        self.signals = signals or WorkerSignals()
        self.outage = outage or Outage(logger=log)
        """Shared with the worker's other services inside a worker; its own when alone."""
        self.registry = registry
        self.backend = backend
        self._clock = clock or registry.clock or (lambda: datetime.now(UTC))
        self._after: dict[str, datetime] = {}
        self._started_at: datetime | None = None
        self._last_prune = float("-inf")
        self._retry: dict[str, tuple[int, datetime]] = {}
        """Schedules whose last claim failed: (failures in a row, when to retry)."""
        self.lateness: collections.deque[float] = collections.deque(maxlen=10_000)
        """Seconds from each slot to its enqueue committing, as this process measured."""

    @property
    def schedules(self) -> list[Schedule]:
        owns = self._owns
        every = self.registry.schedules.values()
        return list(every) if owns is None else [s for s in every if owns(s)]

    async def tick(self, now: datetime) -> list[tuple[str, datetime, SlotOutcome]]:
        """Claim every slot due at ``now``; return what each claim did."""
        if self._started_at is None:
            last = await self.backend.cron_last_slots()
            self._started_at = now
            for schedule in self.schedules:
                self._after[schedule.id] = last.get(schedule.id, now)
        results: list[tuple[str, datetime, SlotOutcome]] = []
        for schedule in self.schedules:
            retry = self._retry.get(schedule.id)
            if retry is not None and now < retry[1]:
                continue  # its failed slot is retried at its own time
            try:
                for slot in self._to_claim(schedule, now):
                    job = schedule.job_for(slot)
                    outcome, job_id = await self.backend.cron_slot_claim(
                        CronSlotClaimParams(schedule.id, slot, job, schedule.overlap)
                    )
                    self._after[schedule.id] = slot
                    results.append((schedule.id, slot, outcome))
                    self._note(schedule, slot, outcome, job_id)
                    if outcome is SlotOutcome.ENQUEUED and job_id is not None:
                        self.registry.note_slot_enqueued(schedule, slot, job_id, job)
            except BackendUnavailable:
                raise  # the database, not this schedule: the outage handling retries all
            except Exception:
                self._failed(schedule, now)
                continue
            self._retry.pop(schedule.id, None)
            self._after[schedule.id] = max(self._after[schedule.id], now)
        return results

    def _failed(self, schedule: Schedule, now: datetime) -> None:
        """One schedule's slot could not be enqueued (a non-transient error: its job cannot
        be built or written). Logged and retried for that schedule alone (1 s doubling to
        ``RETRY_CAP_S``); its slot stays due, the other schedules go on."""
        failures = self._retry.get(schedule.id, (0, now))[0] + 1
        delay = min(RETRY_FIRST_S * 2 ** (failures - 1), RETRY_CAP_S)
        self._retry[schedule.id] = (failures, now + timedelta(seconds=delay))
        log.exception(
            "schedule %s: enqueueing a slot failed; retrying in %.0fs", schedule.id, delay
        )

    def _to_claim(self, schedule: Schedule, now: datetime) -> list[datetime]:
        assert self._started_at is not None
        due = schedule.due_slots(self._after[schedule.id], now)
        missed = [slot for slot in due if slot <= self._started_at]
        on_time = [slot for slot in due if slot > self._started_at]
        return schedule.missed_to_enqueue(missed, now) + on_time

    def _note(
        self, schedule: Schedule, slot: datetime, outcome: SlotOutcome, job_id: int | None
    ) -> None:
        if outcome is SlotOutcome.ENQUEUED:
            self.signals.slot_enqueued.fire((schedule.id, slot))
            late = time.time() - slot.timestamp()
            self.lateness.append(late)
            log.info(
                "schedule %s: slot %s enqueued as job %s (%.3fs after the slot)",
                schedule.id,
                slot.isoformat(),
                job_id,
                late,
            )
        elif outcome is SlotOutcome.SKIPPED:
            log.info(
                "schedule %s: slot %s skipped: the previous run is still live",
                schedule.id,
                slot.isoformat(),
            )

    def next_wake(self, now: datetime) -> datetime:
        """The earliest next slot of any schedule, or ``MAX_SLEEP_S`` from now."""
        horizon = now + timedelta(seconds=MAX_SLEEP_S)
        fires = [s.next_fires(now, 1) for s in self.schedules]
        retries = [when for _, when in self._retry.values()]
        return min([f[0] for f in fires if f] + retries + [horizon])

    async def prune(self, now: datetime) -> None:
        keep = max([SLOT_RETENTION] + [timedelta(seconds=s.max_delay) for s in self.schedules])
        removed = await self.backend.cron_slots_prune(now - keep)
        if removed:
            log.info("pruned %d old cron slot rows", removed)

    async def serve(self) -> None:
        await self.run()

    async def run(self) -> None:
        """Until cancelled. Database errors back off and retry; anything else propagates."""
        if not self.schedules:
            self.mark_ready()
            return
        log.info("scheduler started with %d schedules", len(self.schedules))
        failures = 0
        while True:
            now = self._clock()
            try:
                await self.tick(now)
                if time.monotonic() - self._last_prune > PRUNE_EVERY_S:
                    await self.prune(now)
                    self._last_prune = time.monotonic()
                failures = 0
                self.outage.answered()
            except BackendUnavailable as exc:
                self.mark_ready()  # the retries below are its work while the database is away
                failures += 1
                self.outage.failed(self.name, exc)
                await asyncio.sleep(retry_delay(failures, first_s=0.5))
                continue
            self.mark_ready()
            wake = self.next_wake(now)
            await asyncio.sleep(max(0.0, (wake - self._clock()).total_seconds()))
