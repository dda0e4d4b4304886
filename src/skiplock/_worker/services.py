"""A worker's small background services: wake-ups, reclaim, cancellation checks, pruning,
vacuuming the hot rows, rotating their segments, checkpointing SQLite's write-ahead log.

Each is a ``Service`` run in the worker's TaskGroup; each survives database outages by
reporting them to the worker's shared ``Outage`` (one log line per change, not per attempt)
and retrying (with capped, jittered backoff where it reconnects), and the worker stops them
when it stops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from .._backends import Backend
from .._backends.params import (
    AuditPruneParams,
    HotVacuum,
    JobPruneParams,
    Rotation,
    WalCheckpoint,
)
from .._backends.protocol import WAL_HELD_MIN_BYTES
from .._config import WorkerConfig
from .._job import ReclaimedJob, StorageHold, StorageHolder
from .._observe import events
from .._observe.holds import DOCS, describe, duration, others, relations, remedy, size, who
from .._observe.meter import Meter
from .._outage import Outage, retry_delay
from .._service import Service
from ..errors import BackendUnavailable
from .dead_workers import DeadWorkers
from .holds import HoldLog, find
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
VACUUM_SHARE = 0.1
"""The most of the time the vacuumer's vacuums may take: after one that took t seconds it
pauses at least t * (1 / share - 1). At 20,000 jobs a second a vacuum every second of the live
partition took the claims' CPU on two cores, and a 30-minute soak's pickup p50 rose from 5 ms
to seconds (benchmarks/HISTORY.md, "W11")."""
HELD_WARN_LOOKS = 3
"""Held vacuums in a row before the vacuumer warns (several seconds of a held horizon). A
short hold is ordinary: autovacuum's ANALYZE of a growing history partition holds a snapshot
for a second or two each naptime, and a 30-minute soak at 20,000 jobs a second warned once a
minute for it."""


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
    """At start and every ``maintenance_interval_s``, frees the leases of workers the registry
    shows dead (``DeadWorkers``; none at start is judged by silence, only by a process gone on
    this machine); every ``maintenance_interval_s``, returns rows whose lease expired
    (anywhere) to pending, then sweeps the workflows: releases a crash or a commit race left
    undone (a finished parent's open edges) and parked waits past their timeout
    (``workflow_flows.sweep``). What it returns to pending wakes ``wake`` for its queue."""

    name = "rescuer"

    def __init__(
        self,
        backend: Backend,
        config: WorkerConfig,
        signals: WorkerSignals,
        outage: Outage | None = None,
        meter: Meter | None = None,
        dead_workers: DeadWorkers | None = None,
        wake: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self.meter = meter or Meter()
        self.backend = backend
        self.worker = config.name
        self.interval_s = config.maintenance_interval_s
        self.signals = signals
        self.outage = outage or Outage()
        self.dead_workers = dead_workers
        self.wake = wake
        self._sweep_failure: str | None = None
        """The last sweep's error while sweeps fail (logged once, not at every sweep)."""
        self.expiry = asyncio.Lock()
        """Held while this worker ends waits past their timeout (the wait timer, the rescuer's
        sweep and a burst's end share one, ``Worker``): the expiry skips rows another holds, so
        a burst that looked while another service of its own was ending a wait would see it
        neither waiting nor pending, and end with the job left to run."""

    async def serve(self) -> None:
        await self.bury()
        self.mark_ready()
        while True:
            await asyncio.sleep(self.interval_s)
            details: list[ReclaimedJob] = []
            try:
                reclaimed = [
                    job_id
                    for lane in self.backend.lanes
                    for job_id in await self.backend.job_reclaim_expired(details, lane)
                ]
            except BackendUnavailable as exc:
                self.outage.failed(self.name, exc)
                continue
            self.outage.answered()
            self.reclaimed(reclaimed, details)
            await self.bury()
            await self.sweep()

    async def bury(self) -> None:
        """Free the leases of the workers the registry shows dead (an outage reported)."""
        if self.dead_workers is None:
            return
        details: list[ReclaimedJob] = []
        try:
            reclaimed = await self.dead_workers.sweep(details)
        except BackendUnavailable as exc:
            self.outage.failed(self.name, exc)
            return
        self.outage.answered()
        if reclaimed:
            self.reclaimed(reclaimed, details, gone=True)

    def reclaimed(
        self, reclaimed: list[int], details: list[ReclaimedJob], gone: bool = False
    ) -> None:
        self.meter.reclaim(len(reclaimed))
        for job in details:
            events.reclaimed(job, self.worker, gone)
        if self.wake is not None:
            for queue in {job.queue for job in details}:
                self.wake(queue)
        self.signals.reclaimed.fire(list(reclaimed))

    async def sweep(self) -> None:
        """One workflow sweep; an outage is reported as the reclaim's is. Any other failure
        is logged (once while it repeats) and the worker goes on: the sweep is a backstop of
        releases, and a fault in one of them must not stop the worker that runs every other
        job (the backend's sweep already takes its items one by one past a failing one)."""
        try:
            async with self.expiry:
                swept = await self.backend.workflow_sweep()
        except BackendUnavailable as exc:
            self.outage.failed(self.name, exc)
            return
        except Exception as exc:
            if str(exc) != self._sweep_failure:
                log.error("workflow sweep failed; the next tries again: %s", exc, exc_info=exc)
            self._sweep_failure = str(exc)
            return
        if self._sweep_failure is not None:
            log.info("workflow sweep: working again")
            self._sweep_failure = None
        if swept.released or swept.timed_out:
            log.info(
                "workflow sweep: %d released, %d waits timed out",
                len(swept.released),
                len(swept.timed_out),
            )
            self.signals.swept.fire(swept.released + swept.timed_out)


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
                audited = await self.prune_audit_once()
            except BackendUnavailable as exc:
                self.outage.failed(self.name, exc)
                continue
            self.outage.answered()
            if removed:
                log.info("pruned %d finished jobs past retention", removed)
            if audited:
                log.info("pruned %d audit trail entries past retention", audited)

    async def prune_once(self) -> int:
        params = JobPruneParams(
            self.config.retention_finished_s, self.config.retention_dead_s, PRUNE_BATCH
        )
        await self.backend.storage_upkeep()  # the next days' partitions, before they are due
        removed = 0
        # Until a call removes nothing: a short batch does not mean done, since a call that
        # dropped one expired day (SQLite drops one a call) counts only that day's rows, and a
        # day smaller than a batch would otherwise leave the next days to the next tick.
        for _ in range(PRUNE_MAX_BATCHES):
            batch = await self.backend.job_prune(params)
            removed += batch
            if batch == 0:
                break
            await asyncio.sleep(0.01)  # let claims in between batches
        for _ in range(PRUNE_MAX_BATCHES):  # what workflows left of the jobs now gone (a
            if await self.backend.workflow_prune(PRUNE_BATCH) == 0:  # batch goes once its
                break  # members have, a call later)
        for _ in range(PRUNE_MAX_BATCHES):  # the logs of the jobs now gone
            if await self.backend.job_logs_prune(PRUNE_BATCH) == 0:
                break
        return removed

    async def prune_audit_once(self) -> int:
        """The audit trail's entries past ``retention_audit_s``, a bounded batch at a time."""
        removed = 0
        for _ in range(PRUNE_MAX_BATCHES):
            params = AuditPruneParams(self.config.retention_audit_s, PRUNE_BATCH)
            batch = await self.backend.audit_prune(params)
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
        self.held_looks = 0
        """Vacuums in a row that kept more than they removed (a skipped one does not count,
        nor end the run)."""

    @property
    def held(self) -> bool:
        return self.pause_s > self.interval_s

    def after(self, done: HotVacuum | None, took_s: float = 0.0) -> float:
        """The pause after a look that vacuumed (``done``, in ``took_s``) or found too few to
        (None): the held rule's, and never less than keeps the vacuums to VACUUM_SHARE of the
        time."""
        if done is not None and done.skipped:
            return self.pause_s  # another vacuum is at work: look again after the same pause
        if done is not None and done.held:
            self.held_looks += 1
            self.pause_s = min(max(self.pause_s * 2, self.interval_s), VACUUM_MAX_PAUSE_S)
        else:
            self.held_looks = 0
            self.pause_s = self.interval_s
        rest = took_s * (1.0 / VACUUM_SHARE - 1.0) if done is not None else 0.0
        return max(self.pause_s, min(rest, VACUUM_MAX_PAUSE_S))


class Vacuumer(Service):
    """Keeps the live jobs' dead row versions few on PostgreSQL, in one loop (one session at a
    time): a vacuum (``Backend.hot_vacuum``) when its pace says, since autovacuum visits a
    database once a minute and at thousands of jobs a second the claim indexes would fill with
    dead entries in between; and a rotation (``Rotator``) every ``rotate_interval_s``, since no
    vacuum removes what a held MVCC horizon keeps. Every worker looks; one vacuums (the others
    skip a table being vacuumed) and one rotates at a time. Logs once when vacuums have stopped
    removing for HELD_WARN_LOOKS in a row (a held horizon, named so an operator can look for the
    old transaction) and once when they remove again."""

    name = "vacuumer"

    def __init__(
        self,
        backend: Backend,
        config: WorkerConfig,
        outage: Outage | None = None,
        meter: Meter | None = None,
    ) -> None:
        super().__init__()
        meter = meter or Meter()
        self.backend = backend
        self.pace = VacuumPace(config.vacuum_interval_s)
        self.rotator = Rotator(backend, config, meter) if config.rotate_interval_s > 0 else None
        self.outage = outage or Outage()
        self.vacuums = 0
        self.horizon = HoldLog("horizon", meter)
        """Says who holds the MVCC horizon while vacuums keep what they would remove."""
        self._held_from: float | None = None
        """When the running hold's first held vacuum was (``time.monotonic()``)."""

    async def serve(self) -> None:
        self.mark_ready()
        loop = asyncio.get_running_loop()
        vacuuming = self.pace.interval_s > 0
        next_vacuum = loop.time() + self.pace.pause_s if vacuuming else None
        rotator = self.rotator
        next_turn = loop.time() + rotator.pause_s if rotator is not None else None
        while True:
            due = min(t for t in (next_vacuum, next_turn) if t is not None)
            await asyncio.sleep(max(0.0, due - loop.time()))
            try:
                if rotator is not None and next_turn is not None and loop.time() >= next_turn:
                    next_turn = loop.time() + await rotator.turn()
                if next_vacuum is not None and loop.time() >= next_vacuum:
                    began = loop.time()
                    done = await self.backend.hot_vacuum(VACUUM_MIN_DEAD)
                    next_vacuum = loop.time() + await self.after(done, loop.time() - began)
            except BackendUnavailable as exc:
                self.outage.failed(self.name, exc)
                now = loop.time()
                next_vacuum = None if next_vacuum is None else max(next_vacuum, now + 0.5)
                next_turn = None if next_turn is None else max(next_turn, now + 0.5)
                continue
            self.outage.answered()

    async def after(self, done: HotVacuum | None, took_s: float = 0.0) -> float:
        """Take in one look's result (the look took ``took_s``) and say what it means; the
        pause before the next."""
        pause = self.look(done, took_s)
        await self.report(done)
        return pause

    def look(self, done: HotVacuum | None, took_s: float = 0.0) -> float:
        """Take in one look's result (the look took ``took_s``); the pause before the next."""
        pause = self.pace.after(done, took_s)
        if done is not None and not done.skipped:
            self.vacuums += 1
            log.debug(
                "vacuumed the live jobs: %d dead versions, %d left",
                done.dead_before,
                done.dead_after,
            )
        if self.pace.held_looks == 0:
            self._held_from = None
        elif self._held_from is None:
            self._held_from = time.monotonic()
        return pause

    async def report(self, done: HotVacuum | None) -> None:
        """Past HELD_WARN_LOOKS held vacuums in a row, look up who holds the horizon (each
        held look: the holder may change) and say so once a holder; once vacuums remove
        again, say that once."""
        if self.pace.held_looks == 0:
            self.horizon.released(_horizon_released)
            return
        if self.pace.held_looks < HELD_WARN_LOOKS or done is None or not done.held:
            return
        if done.kept is not None and done.removed is not None:
            found = f"kept {done.kept} dead row versions it could not remove yet"
            found += f" (removed {done.removed})"
            kept = done.kept
        else:
            found = f"left {done.dead_after} of {done.dead_before} dead row versions"
            kept = done.dead_after
        since = self._held_from if self._held_from is not None else time.monotonic()
        held_s = time.monotonic() - since

        def say(holder: StorageHolder, hold: StorageHold) -> str:
            return (
                f"vacuum of the live jobs {found}: {describe(holder)}{others(hold)} holds the "
                f"database's MVCC horizon, for {duration(held_s)} so far; claims slow down "
                f"until it ends: {remedy(holder)}, or see {DOCS}"
            )

        unnamed = (
            f"vacuum of the live jobs {found}, {HELD_WARN_LOOKS} times in a row: an old "
            "transaction holds the database's MVCC horizon (see pg_stat_activity.backend_xmin); "
            "claims slow down until it ends"
        )
        holders = await find(self.backend, "horizon")
        self.horizon.held(since, holders, say, unnamed, dead_versions=kept)


def _horizon_released(holder: StorageHolder | None, held_s: float) -> str:
    line = "vacuum of the live jobs removes dead row versions again"
    if holder is None:
        return line
    return f"{line}: {who(holder)} no longer holds the MVCC horizon ({duration(held_s)} held)"


ROTATE_MIN_BYTES = 1 << 20
"""The size the newest generation of the live jobs grows to before the next is made (about
4,000 jobs' row versions): a generation costs catalog churn (two tables made and dropped), so
a quiet queue makes none and leaves its dead versions to vacuum."""
ROTATE_MAX_PAUSE_S = 30.0
"""The longest pause between rotations while a turn keeps being held (a row or a lock past
its short timeout)."""


class Rotator:
    """Turns the live jobs' generations (``Backend.rotate_live``), for the vacuumer's loop: on
    PostgreSQL a held MVCC horizon keeps vacuum from removing anything, and an old generation
    detached leaves the claims' path with its dead versions anyway. A reader holding an old
    generation never slows the turns (its detach waits on a later one); a turn that could not
    move or attach doubles the pause, up to ROTATE_MAX_PAUSE_S."""

    def __init__(self, backend: Backend, config: WorkerConfig, meter: Meter | None = None) -> None:
        self.backend = backend
        self.interval_s = config.rotate_interval_s
        self.pause_s = config.rotate_interval_s
        self.detached = 0
        self.dropped = 0
        self.moved = 0
        self.pending = 0
        self.lock = HoldLog("lock", meter or Meter())
        """Says who holds the retired generations while their detach waits for them."""
        self.held_turns = 0
        """Turns in a row that left a generation waiting for its readers."""
        self._held_from: float | None = None

    async def turn(self) -> float:
        """One rotation; the pause before the next (BackendUnavailable passes through)."""
        done = await self.backend.rotate_live(ROTATE_MIN_BYTES)
        pause = self.look(done)
        await self.report(done)
        return pause

    async def report(self, done: Rotation | None) -> None:
        """Past HELD_WARN_LOOKS turns in a row that left retired generations waiting for
        sessions that read them (``held_on``), look up who holds them (each such turn: the
        holder may change) and say so once a holder; once none waits, say that once. Another
        session's turn (None) says nothing."""
        if done is None:
            return
        if not done.held_on:
            self.held_turns, self._held_from = 0, None
            self.lock.released(_rotation_released)
            return
        self.held_turns += 1
        if self._held_from is None:
            self._held_from = time.monotonic()
        if self.held_turns < HELD_WARN_LOOKS:
            return
        found = await find(self.backend, "lock", done.held_on)
        held_s = time.monotonic() - self._held_from
        waiting = done.pending

        def say(holder: StorageHolder, hold: StorageHold) -> str:
            n = hold.dead_versions
            dead = "" if n is None else f" ({n:,} dead row versions wait there)"
            return (
                f"{waiting} retired generation(s) of the live jobs wait to be dropped, for"
                f" {duration(held_s)}, on {describe(holder)}{others(hold)}, which holds a lock"
                f" on {relations(holder.relations)}{dead}; claims do not wait on it:"
                f" {remedy(holder)}, or see {DOCS}"
            )

        dead = found.dead_versions if found is not None else None
        self.lock.held(self._held_from, found, say, None, dead_versions=dead)

    def look(self, done: Rotation | None) -> float:
        """Take in one look's result; the pause before the next (kept in ``pause_s``)."""
        if done is not None:
            self.moved += done.moved
            self.dropped += done.dropped
            self.pending = done.pending
            if done.detached:
                self.detached += 1
                log.debug("detached live generation %d (%d moved aside)", done.segment, done.moved)
        held = done is not None and done.held
        self.pause_s = min(self.pause_s * 2, ROTATE_MAX_PAUSE_S) if held else self.interval_s
        return self.pause_s


def _rotation_released(holder: StorageHolder | None, held_s: float) -> str:
    by = "" if holder is None else f" ({who(holder)} let go)"
    return f"retired live generations are dropped again after {duration(held_s)} held{by}"


WAL_TRUNCATE_ABOVE = 64 << 20
"""SQLite: a write-ahead log file over this is truncated once a checkpoint completes: SQLite
starts writing it over from its beginning but keeps its high-water size."""
WAL_HELD_WARN_S = 10.0
"""SQLite: how long checkpoints must have failed to complete (and WAL_HELD_MIN_BYTES be left
uncopied) before the checkpointer says so: a read of a few seconds is ordinary."""


class Checkpointer(Service):
    """Keeps SQLite's write-ahead log in bounds (``sqlite_wal.py``): every
    ``vacuum_interval_s`` a passive checkpoint, which never waits and says whether a reader's
    open transaction held it back; once none does and the file is over WAL_TRUNCATE_ABOVE,
    a truncating one, so the file shrinks back. Says once when checkpoints have been held
    for WAL_HELD_WARN_S with WAL_HELD_MIN_BYTES of the log stuck (SQLite cannot say which
    connection holds it), and once, with the size the file came back to, when they complete
    again; the meter keeps the file's size and the hold's age."""

    name = "checkpointer"

    def __init__(
        self,
        backend: Backend,
        config: WorkerConfig,
        outage: Outage | None = None,
        meter: Meter | None = None,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.interval_s = config.vacuum_interval_s
        self.outage = outage or Outage()
        self.wal = HoldLog("wal", meter or Meter())
        self.truncate_above = WAL_TRUNCATE_ABOVE
        self.warn_after_s = WAL_HELD_WARN_S
        self.min_bytes = WAL_HELD_MIN_BYTES
        self.checkpoints = 0
        self._held_from: float | None = None
        self._largest = 0
        """The largest the file was while held (for the line at its end)."""

    async def serve(self) -> None:
        self.mark_ready()
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.turn()
            except BackendUnavailable as exc:
                self.outage.failed(self.name, exc)
                continue
            self.outage.answered()

    async def turn(self) -> WalCheckpoint | None:
        """One look (BackendUnavailable passes through); what the checkpoint did."""
        done = await self.backend.wal_checkpoint(self.truncate_above)
        self.look(done)
        return done

    def look(self, done: WalCheckpoint | None) -> None:
        if done is None or done.complete is None:
            return  # another checkpoint was running: this one says nothing
        self.checkpoints += 1
        now_bytes = done.wal_bytes if done.truncated_to is None else done.truncated_to
        self.wal.gauge.wal_bytes = now_bytes
        if done.complete:
            if done.truncated_to is not None:
                log.debug("WAL truncated from %d to %d bytes", done.wal_bytes, now_bytes)
            largest = self._largest

            def released(_: StorageHolder | None, held_s: float) -> str:
                return (
                    f"WAL checkpointed again after {duration(held_s)} held: the file is "
                    f"{size(now_bytes)}, from {size(largest)} at most"
                )

            self.wal.released(released)
            self._held_from, self._largest = None, 0
            return
        now = self.wal.clock()
        if self._held_from is None:
            self._held_from = now
        self._largest = max(self._largest, done.wal_bytes)
        if now - self._held_from < self.warn_after_s or done.pending_bytes < self.min_bytes:
            return
        held_s = now - self._held_from
        unnamed = (
            f"WAL at {size(done.wal_bytes)}: a reader's open transaction is keeping it from "
            f"being checkpointed ({size(done.pending_bytes)} of it, for {duration(held_s)}); "
            "end it (SQLite cannot say which connection holds it: a long read, a sqlite3 "
            f"shell left in BEGIN, a backup reading the file), or see {DOCS}"
        )
        self.wal.held(self._held_from, None, None, unnamed, wal_bytes=now_bytes)
