"""The executor service: gives claimed jobs slots, runs each in its own task, records outcomes.

It owns the worker's job bookkeeping: jobs running (at most ``concurrency``), jobs claimed
ahead waiting for a slot, and the outcome of each handed to the completer. Its lifecycle is
the shutdown protocol: once the worker stops, running jobs get ``shutdown_timeout_s`` to
finish, then the rest are cancelled and released to pending with their attempt given back.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Iterable

from .._config import WorkerConfig
from .._job import ClaimedJob, Completion, Disposition
from .._observe import events
from .._observe.meter import Meter
from .._outcomes import Cancel
from .._registry import Registry
from .._service import Service
from .breaker import Breakers
from .classify import Decision, error_record
from .completer import Completer
from .executor import execute
from .pool import JobPool
from .progress import ProgressBoard
from .signals import WorkerSignals

log = logging.getLogger("skiplock.worker")

REQUEUES = (Disposition.RETRY, Disposition.SNOOZE, Disposition.RELEASE)
FAILURES = (Disposition.RETRY, Disposition.DEAD)


class Runner(Service):
    """Runs claimed jobs in slots; drains on ``stop``; ``force`` skips the grace period."""

    name = "executor"

    def __init__(
        self,
        registry: Registry,
        config: WorkerConfig,
        completer: Completer,
        breakers: Breakers,
        signals: WorkerSignals,
        meter: Meter | None = None,
    ) -> None:
        super().__init__()
        self.meter = meter or Meter()
        self.registry = registry
        self.config = config
        self.completer = completer
        self.progress = ProgressBoard()
        """Progress its jobs report, until the lease keeper's next beat writes it."""
        self.breakers = breakers
        self.signals = signals
        self.running: dict[int, tuple[asyncio.Task[None], ClaimedJob]] = {}
        self.started_at: dict[int, float] = {}
        """When each running job started (loop time): how long the slots have been busy."""
        self.ready: collections.deque[ClaimedJob] = collections.deque()
        """Claimed ahead (``prefetch``), waiting for a slot; heartbeated like running jobs."""
        self.slot_freed = asyncio.Event()
        self.stopping = asyncio.Event()
        """Set once the worker stops: no job starts any more."""
        self.forced = asyncio.Event()
        self._drain_now = asyncio.Event()
        self.mean_duration: float | None = None
        self.requeues = 0
        """Outcomes recorded that put a job back to pending (retry, snooze, release)."""
        self.processed = 0
        self._cancel_requested: set[int] = set()
        self._tg: asyncio.TaskGroup | None = None
        self._pool: JobPool | None = None

    async def start(self, tg: asyncio.TaskGroup) -> None:
        self._tg = tg
        await super().start(tg)

    async def serve(self) -> None:
        pool = JobPool(self.config.concurrency, thread_name_prefix="skiplock-job")
        self._pool = pool
        try:
            self.mark_ready()
            await self._drain_now.wait()
            await self._drain()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def hold(self) -> None:
        """Start no more jobs (the worker is stopping; the producer may still be claiming)."""
        self.stopping.set()
        self.slot_freed.set()  # a producer waiting for a slot (all busy) must see the stop

    def stop(self) -> None:
        """Drain: running jobs get the grace period, then are released. Idempotent."""
        self.hold()
        self._stopped = True
        self._drain_now.set()

    def force(self) -> None:
        """Skip what is left of the grace period (a second stop request)."""
        self.forced.set()

    @property
    def free(self) -> int:
        return self.config.concurrency - len(self.running)

    def take(self, jobs: Iterable[ClaimedJob]) -> None:
        """Jobs just claimed: start them while slots are free, hold the rest.

        A job this worker already holds under another token lapsed and was swept while we
        held it: this claim proves the old lease lost, so the old attempt is cancelled here,
        before the new one can take its entry in ``running`` (keyed by id); the next
        heartbeat, which answers (id, token) pairs, would also report it."""
        jobs = list(jobs)
        held = {job.id: job.lease_token for job in self.held()}
        stale = {(j.id, held[j.id]) for j in jobs if held.get(j.id, j.lease_token) != j.lease_token}
        if stale:
            self.leases_lost(stale)
        self.ready.extend(jobs)
        self.start_ready()

    def start_ready(self) -> None:
        """Start claimed jobs while there are free slots (not once stopping)."""
        while self.ready and self.free > 0 and not self.stopping.is_set():
            job = self.ready.popleft()
            assert self._tg is not None and self._pool is not None
            task = self._tg.create_task(self._run(job, self._pool), name=f"skiplock-job-{job.id}")
            self.running[job.id] = (task, job)
            self.meter.start(job.queue, job.task)
            events.started(job, self.config.name)
            self.started_at[job.id] = asyncio.get_running_loop().time()
            self.signals.started.fire(job.id)

    def cancel_requested(self, job_id: int) -> None:
        """A person asked to cancel this running job: cancel its task (once)."""
        entry = self.running.get(job_id)
        if entry is not None and job_id not in self._cancel_requested:
            log.info("job %d: cancel requested; cancelling it", job_id)
            self._cancel_requested.add(job_id)
            entry[0].cancel()

    def leases_lost(self, lost: set[tuple[int, str]]) -> None:
        """Another worker owns these now: forget those claimed ahead, cancel those running."""
        self.ready = collections.deque(j for j in self.ready if (j.id, j.lease_token) not in lost)
        for job_id, token in lost:
            self.signals.lease_lost.fire(job_id)
            entry = self.running.get(job_id)
            if entry is not None and entry[1].lease_token == token:
                log.warning(
                    "job %d: lease lost while running (reclaimed elsewhere); cancelling it here",
                    job_id,
                )
                entry[0].cancel()

    def busy_for(self) -> float:
        """How long the most recently started running job has run: every slot has been busy
        at least this long (0 when a slot is free)."""
        if self.free > 0 or not self.started_at:
            return 0.0
        return asyncio.get_running_loop().time() - max(self.started_at.values())

    def give_back(self, keep: int) -> int:
        """Release jobs claimed ahead beyond the first ``keep`` to pending, their attempt
        given back, so an idle worker elsewhere can take them. Returns how many."""
        released = 0
        while len(self.ready) > keep:
            job = self.ready.pop()
            self.completer.put(
                Completion(job.id, job.lease_token, Disposition.RELEASE, lease_s=job.lease_s)
            )
            released += 1
        return released

    def held(self) -> list[ClaimedJob]:
        """Jobs whose lease this service holds: running and claimed ahead."""
        return [job for _, job in self.running.values()] + list(self.ready)

    # -- one job ------------------------------------------------------------------------------

    async def _run(self, job: ClaimedJob, pool: JobPool) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            if self.registry.tracing is None:
                decision = await execute(self.registry, job, pool, self.progress.put)
            else:
                decision = await self._traced(job, pool)
        except asyncio.CancelledError:
            self._record(job, self._cancelled(job), loop.time() - started)
            raise
        finally:
            entry = self.running.get(job.id)
            if entry is not None and entry[1] is job:  # not a later claim of the same job
                del self.running[job.id]
                self.started_at.pop(job.id, None)
            self.start_ready()  # the next claimed job takes the slot at once
            self.slot_freed.set()
        duration = loop.time() - started
        mean = self.mean_duration
        self.mean_duration = duration if mean is None else mean + 0.1 * (duration - mean)
        self._record(job, decision, duration)

    async def _traced(self, job: ClaimedJob, pool: JobPool) -> Decision:
        """``execute`` inside the attempt's span (current while the task runs)."""
        assert self.registry.tracing is not None
        with self.registry.tracing.run(job, self.config.name) as ended:
            decision = await execute(self.registry, job, pool, self.progress.put)
            ended(decision)
        return decision

    def _cancelled(self, job: ClaimedJob) -> Decision:
        """A cancel a person asked for is final; any other (shutdown) releases the job."""
        if job.id not in self._cancel_requested:
            return Decision(Disposition.RELEASE)  # back to pending, its attempt unspent
        self._cancel_requested.discard(job.id)
        error = error_record(job.attempt, Cancel("cancelled by request while running"))
        return Decision(Disposition.CANCEL, error=error)

    def _record(self, job: ClaimedJob, decision: Decision, duration: float) -> None:
        if decision.error is not None:  # who ran the failed attempt (Django's worker_ids)
            decision.error["worker"] = self.config.name
        self.completer.put(
            Completion(
                job.id,
                job.lease_token,
                decision.disposition,
                decision.delay_s,
                decision.error,
                job.lease_s,
                decision.result_json,
                self.progress.pop(job.id),
                duration,
                job.queue,
                job.task,
                events.on_recorded(job, decision, duration, self.config.name),
            )
        )
        self.processed += 1
        if decision.disposition in REQUEUES:
            self.requeues += 1
        if decision.disposition in FAILURES:
            self.breakers.count_failure(job.task)

    # -- shutdown -----------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Let running jobs finish within the grace period, then release the rest."""
        self._release_ready()
        if self.running:
            log.info(
                "stopping: waiting up to %.0fs for %d running jobs",
                self.config.shutdown_timeout_s,
                len(self.running),
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.shutdown_timeout_s):
                    await self._until_idle_or_forced()
        leftover = [task for task, _ in self.running.values()]
        if leftover:
            log.warning("releasing %d unfinished jobs back to pending", len(leftover))
            for task in leftover:
                task.cancel()
            await asyncio.gather(*leftover, return_exceptions=True)

    async def _until_idle_or_forced(self) -> None:
        while self.running and not self.forced.is_set():
            self.slot_freed.clear()
            forced = asyncio.ensure_future(self.forced.wait())
            freed = asyncio.ensure_future(self.slot_freed.wait())
            try:
                await asyncio.wait([forced, freed], return_when=asyncio.FIRST_COMPLETED)
            finally:
                forced.cancel()
                freed.cancel()

    def _release_ready(self) -> None:
        """Jobs claimed ahead never started: back to pending, their attempt given back."""
        if self.ready:
            log.info("releasing %d jobs claimed ahead back to pending", len(self.ready))
        while self.ready:
            job = self.ready.popleft()
            self.completer.put(
                Completion(
                    job.id,
                    job.lease_token,
                    Disposition.RELEASE,
                    lease_s=job.lease_s,
                    queue=job.queue,
                    task=job.task,
                )
            )
