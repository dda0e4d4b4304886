"""The executor service: gives claimed jobs slots, runs each in its own task, records outcomes.

An untimed sync job (no timeout, untraced) has no Task: it is submitted to the pool at once and
its thread hands how it ended straight back to the runner (``SyncAttempt``), which records it.
Per job that spares the loop a Task, the coroutines of ``execute`` and a pass to wake them
(a sync no-op cost the worker ~38 us of CPU, ~31 so: medians of 8 paired runs); a cancel
ends it as a Task's.

It moves jobs through the worker's ``Ledger`` (which owns what the worker holds): claimed
jobs start while a slot is free, each ends with its outcome handed to the completer. Its
lifecycle is the shutdown protocol: once the worker stops, running jobs get
``shutdown_timeout_s`` to finish, then the rest are cancelled and released to pending with
their attempt given back.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Iterable
from typing import Any

from .. import _job_log as job_log
from .._config import WorkerConfig
from .._durable import DurableSource
from .._job import ClaimedJob, Completion, Disposition
from .._job_log import JobLog, LogBuffer
from .._observe import events
from .._observe.meter import Meter
from .._outcomes import Cancel
from .._registry import Registry
from .._service import Service
from .._task import Task
from .breaker import Breakers
from .claim_window import ClaimWindow
from .classify import Decision, NewerPayload, UnrunnableJob, error_record
from .completer import Completer
from .executor import (
    Ended,
    ended_as,
    execute,
    resolve,
    runs_on_its_own,
    submit_sync,
)
from .ledger import Lease, Ledger
from .pool import JobPool, Work
from .processes import ChildLimits, ChildPool
from .progress import ProgressBoard
from .signals import WorkerSignals

log = logging.getLogger("skiplock.worker")

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
        ledger: Ledger | None = None,
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
        self.ledger = ledger or Ledger(
            config.concurrency, ClaimWindow(config.concurrency, config.prefetch)
        )
        """Every lease the worker holds; this service moves them through their phases."""
        self._durable: DurableSource | None = None
        """Where its jobs' steps and waits go: the completer's backend, on this loop."""
        self.forced = asyncio.Event()
        self._drain_now = asyncio.Event()
        self.processed = 0
        self._cancel_requested: set[int] = set()
        self._tg: asyncio.TaskGroup | None = None
        self._pool: JobPool | None = None
        self._logging = False
        """The job log handler is on the root logger (``_job_log.install``) for this runner."""
        self.children = self._child_pool()
        """The child processes of process tasks (none started until one runs)."""

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
            if self._logging:
                job_log.uninstall()
            pool.shutdown(wait=False, cancel_futures=True)
            await self.children.close()

    def _child_pool(self) -> ChildPool:
        config = self.config
        memory = config.max_memory_per_child_mb
        limits = ChildLimits(
            size=config.child_processes or config.concurrency,
            max_tasks_per_child=config.max_tasks_per_child,
            max_memory_per_child=None if memory is None else int(memory * 2**20),
            kill_grace_s=config.kill_grace_s,
        )
        return ChildPool(limits, default=config.sync_executor)

    def hold(self) -> None:
        """Start no more jobs (the worker is stopping; the producer may still be claiming)."""
        self.ledger.hold()  # also wakes a producer waiting for a slot (all busy)

    def stop(self) -> None:
        """Drain: running jobs get the grace period, then are released. Idempotent."""
        self.hold()
        self._stopped = True
        self._drain_now.set()

    def force(self) -> None:
        """Skip what is left of the grace period (a second stop request)."""
        self.forced.set()

    def take(self, jobs: Iterable[ClaimedJob]) -> None:
        """Jobs just claimed: start them while slots are free, hold the rest.

        A job this worker already holds under another token lapsed and was swept while we
        held it: this claim proves the old lease lost, so the ledger drops it and its stale
        attempt is cancelled here, before the new one starts."""
        for lease in self.ledger.take(jobs):
            self._lost(lease)
        self.start_ready()

    def start_ready(self) -> None:
        """Start claimed jobs while there are free slots (not once stopping): an untimed sync
        job as a ``SyncAttempt`` on the pool, any other in a Task of its own."""
        ledger, registry = self.ledger, self.registry
        while (lease := ledger.start_next()) is not None:
            job = lease.job
            assert self._tg is not None and self._pool is not None
            lease.log = registry.log_buffer(job.task)
            if lease.log is not None and not self._logging:
                # the root logger's handler from the first job that keeps a log: none on a
                # worker whose jobs keep none (a task registered late counts too)
                job_log.install()
                self._logging = True
            task = runs_on_its_own(registry, job, self.children)
            attempt = None if task is None else self._start_sync(lease, task, self._pool)
            if attempt is None:
                name = f"skiplock-job-{job.id}"
                lease.task = self._tg.create_task(self._run(lease, self._pool), name=name)
            else:
                lease.task = attempt
            self.meter.start(job.queue, job.task)
            events.started(job, self.config.name)
            self.signals.started.fire(job.id)

    def cancel_requested(self, job_id: int) -> None:
        """A person asked to cancel this running job: cancel its task (once)."""
        lease = self.ledger.running(job_id)
        if lease is not None and lease.task is not None and job_id not in self._cancel_requested:
            log.info("job %d: cancel requested; cancelling it", job_id)
            self._cancel_requested.add(job_id)
            lease.task.cancel()

    def leases_lost(self, lost: set[tuple[int, str]]) -> None:
        """Another worker owns these now: forget those claimed ahead, cancel those running."""
        for job_id, token in lost:
            lease = self.ledger.lost(job_id, token)
            if lease is None:
                self.signals.lease_lost.fire(job_id)
            else:
                self._lost(lease)

    def _lost(self, lease: Lease) -> None:
        self.signals.lease_lost.fire(lease.job.id)
        if lease.in_slot and lease.task is not None:
            log.warning(
                "job %d: lease lost while running (reclaimed elsewhere); cancelling it here",
                lease.job.id,
            )
            lease.task.cancel()

    def give_back(self, keep: int) -> int:
        """Release jobs claimed ahead beyond the first ``keep`` to pending, their attempt
        given back, so an idle worker elsewhere can take them. Returns how many."""
        given = self.ledger.give_back(keep)
        for lease in given:
            job = lease.job
            self.completer.put(
                Completion(
                    job.id,
                    job.lease_token,
                    Disposition.RELEASE,
                    lease_s=job.lease_s,
                    segment=job.segment,
                    lane=job.lane,
                )
            )
        return len(given)

    # -- one job ------------------------------------------------------------------------------

    def _start_sync(self, lease: Lease, task: Task[Any, Any], pool: JobPool) -> SyncAttempt | None:
        """Submit an untimed sync job to the pool, its outcome handed back without a Task
        (None: its row cannot run as it is, and ``execute`` in a Task records why)."""
        job = lease.job
        try:
            task, args, kwargs = resolve(self.registry, job)
        except (UnrunnableJob, NewerPayload):
            return None
        attempt = SyncAttempt(self, lease, task, pool)
        attempt.work, attempt.context = submit_sync(
            job,
            args,
            kwargs,
            task.fn,
            pool,
            self.progress.put,
            self.durable_source(),
            attempt.ended,
            lease.log,
        )
        return attempt

    def _crash(self, exc: BaseException) -> None:
        """A bug met outside any Task (a ``SyncAttempt``'s record): end the worker with it,
        loudly, as a Task's would (its TaskGroup cancels the rest and ``run`` raises)."""
        assert self._tg is not None

        async def reraise() -> None:
            raise exc

        self._tg.create_task(reraise(), name="skiplock-runner-bug")

    def durable_source(self) -> DurableSource:
        """Made on the first job, on the worker's loop (a sync task's steps run there)."""
        source = self._durable
        if source is None:
            loop = asyncio.get_running_loop()
            backend, limit = self.completer.backend, self.registry.max_result_bytes
            source = self._durable = DurableSource(backend, limit, loop)
        return source

    async def _run(self, lease: Lease, pool: JobPool) -> None:
        job = lease.job
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            if self.registry.tracing is None:
                decision = await execute(
                    self.registry,
                    job,
                    pool,
                    self.progress.put,
                    self.durable_source(),
                    self.children,
                    lease.log,
                )
            else:
                decision = await self._traced(job, pool, lease.log)
        except asyncio.CancelledError:
            self._record(lease, self._cancelled(job), loop.time() - started, measured=False)
            raise
        self._record(lease, decision, loop.time() - started, measured=True)

    async def _traced(self, job: ClaimedJob, pool: JobPool, log: LogBuffer | None) -> Decision:
        """``execute`` inside the attempt's span (current while the task runs)."""
        assert self.registry.tracing is not None
        with self.registry.tracing.run(job, self.config.name) as ended:
            decision = await execute(
                self.registry,
                job,
                pool,
                self.progress.put,
                self.durable_source(),
                self.children,
                log,
            )
            ended(decision)
        return decision

    def _cancelled(self, job: ClaimedJob) -> Decision:
        """A cancel a person asked for is final; any other (shutdown) releases the job."""
        if job.id not in self._cancel_requested:
            return Decision(Disposition.RELEASE)  # back to pending, its attempt unspent
        self._cancel_requested.discard(job.id)
        error = error_record(job.attempt, Cancel("cancelled by request while running"))
        return Decision(Disposition.CANCEL, error=error)

    def _record(self, lease: Lease, decision: Decision, duration: float, measured: bool) -> None:
        """The outcome to the completer, then the slot freed for the next claimed job
        (``measured``: the job ran to its end, so its duration feeds the claim window)."""
        job = lease.job
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
                job.segment,
                job.lane,
                _kept(lease, job),
            )
        )
        lease.log = None
        self.ledger.finish(lease, decision.disposition, duration if measured else None)
        self.start_ready()  # the next claimed job takes the slot at once
        self.processed += 1
        if decision.disposition in FAILURES:
            self.breakers.count_failure(job.task)

    # -- shutdown -----------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Let running jobs finish within the grace period, then release the rest."""
        self._release_ready()
        ledger = self.ledger
        if ledger.busy:
            log.info(
                "stopping: waiting up to %.0fs for %d running jobs",
                self.config.shutdown_timeout_s,
                ledger.busy,
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.shutdown_timeout_s):
                    await self._until_idle_or_forced()
        leftover = ledger.attempts()
        if leftover:
            log.warning("releasing %d unfinished jobs back to pending", len(leftover))
            for task in leftover:
                task.cancel()
            await asyncio.gather(*leftover, return_exceptions=True)

    async def _until_idle_or_forced(self) -> None:
        slot_freed = self.ledger.slot_freed
        while self.ledger.busy and not self.forced.is_set():
            slot_freed.clear()
            forced = asyncio.ensure_future(self.forced.wait())
            freed = asyncio.ensure_future(slot_freed.wait())
            try:
                await asyncio.wait([forced, freed], return_when=asyncio.FIRST_COMPLETED)
            finally:
                forced.cancel()
                freed.cancel()

    def _release_ready(self) -> None:
        """Jobs claimed ahead never started: back to pending, their attempt given back."""
        given = self.ledger.give_back(0)
        if given:
            log.info("releasing %d jobs claimed ahead back to pending", len(given))
        for lease in reversed(given):  # in claim order
            job = lease.job
            self.completer.put(
                Completion(
                    job.id,
                    job.lease_token,
                    Disposition.RELEASE,
                    lease_s=job.lease_s,
                    queue=job.queue,
                    task=job.task,
                    segment=job.segment,
                    lane=job.lane,
                )
            )


def _kept(lease: Lease, job: ClaimedJob) -> JobLog | None:
    """What the attempt's log keeps (None: its task keeps none, or it logged nothing)."""
    log = lease.log
    return None if log is None or log.empty else log.job_log(job.id, job.attempt)


class SyncAttempt(asyncio.Future[None]):
    """An untimed sync job's attempt run without a Task of its own (``executor.submit_sync``):
    the lease's ``task`` while it runs. Its thread hands how it ended straight to ``ended``,
    which records the outcome; ``cancel()`` ends it as a cancelled Task's attempt ends, on the
    loop's next pass: released to pending, or cancelled when a person asked. The thread
    cannot be stopped: a queued call never starts, a running one's thread is outgrown by the
    pool, and what it returns after the cancel is dropped (as ``_call_sync`` does)."""

    def __init__(self, runner: Runner, lease: Lease, task: Task[Any, Any], pool: JobPool) -> None:
        loop = asyncio.get_running_loop()
        super().__init__(loop=loop)
        self.runner = runner
        self.lease = lease
        self.task = task
        self.pool = pool
        self.began = loop.time()
        self.work: Work | Any = None
        """The pool's handle of the call (set once submitted)."""
        self.context = contextvars.Context()
        """Where its outcome is decided (``current_job()`` is the job there)."""

    def ended(self, ended: Ended) -> None:
        """On the loop, from the job's thread: record the outcome (nothing once cancelled)."""
        if self.done():
            return
        runner, lease = self.runner, self.lease
        try:
            decision = self.context.run(ended_as, runner.registry, lease.job, self.task, ended)
            duration = self.get_loop().time() - self.began
            runner._record(lease, decision, duration, measured=True)
        except BaseException as exc:  # a bug: the worker ends with it
            runner._crash(exc)
            self.set_exception(exc)
            return
        self.set_result(None)

    def cancel(self, msg: Any | None = None) -> bool:
        if not super().cancel(msg):
            return False
        work = self.work
        if work is not None:
            work.cancel()  # a queued job never starts; a running one cannot be stopped
            if isinstance(work, Work) and work.running():
                self.pool.note_stuck(work)
        self.get_loop().call_soon(self._record_cancel)
        return True

    def _record_cancel(self) -> None:
        runner, lease = self.runner, self.lease
        try:
            decision = runner._cancelled(lease.job)
            duration = self.get_loop().time() - self.began
            runner._record(lease, decision, duration, measured=False)
        except BaseException as exc:
            runner._crash(exc)
