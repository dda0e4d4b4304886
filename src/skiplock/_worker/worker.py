"""``Worker``: one asyncio TaskGroup that claims, runs and records jobs.

    producer ──claims──> job tasks (executor) ──outcomes──> completer ──batches──> backend
       ^
       └── wake-ups: notifier (LISTEN/NOTIFY), in-process enqueues, the poll backstop
    maintenance: heartbeats for running jobs, reclaim of expired leases
    scheduler: enqueues cron slots (when the app has schedules)

If any service dies the TaskGroup cancels the rest and ``run`` raises: a worker that has
quietly stopped consuming is worse than one that exits loudly.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import logging
import os
import random
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .._app import App
from .._backends import Backend
from .._backends.base import ClaimParams
from .._config import WorkerConfig
from .._job import ClaimedJob, Completion, Disposition
from .._outcomes import Cancel
from .._scheduler import Scheduler
from .._url import mask_url
from ..errors import BackendError
from .breaker import Breakers
from .classify import Decision, error_record
from .completer import Completer
from .executor import execute
from .services import MAX_BACKOFF_S, listen_forever, prune_forever

log = logging.getLogger("skiplock.worker")

HEARTBEAT_INTERVAL_S = 10.0
PREFETCH_SHORT_JOB_S = 1.0
"""Claim ahead (by default) only while jobs take less than this on average."""
MIN_BEAT_S = 0.2


async def _wait(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait for ``event`` at most ``timeout`` seconds; True if it was set."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
    return event.is_set()


class Worker:
    """Runs an App's jobs. ``await Worker(app).run()`` until ``request_stop()``."""

    def __init__(self, app: App, config: WorkerConfig | None = None, **options: Any) -> None:
        config = config or WorkerConfig()
        self.app = app
        self.config = dataclasses.replace(config, **options) if options else config
        self.name = self.config.name or f"{socket.gethostname()}:{os.getpid()}"
        self._token_prefix = f"{self.name}:{uuid.uuid4().hex[:12]}"
        self._claims = itertools.count(1)
        self._stopping = asyncio.Event()
        self._forced = asyncio.Event()
        self._wake = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._running: dict[int, tuple[asyncio.Task[None], ClaimedJob]] = {}
        self._ready: collections.deque[ClaimedJob] = collections.deque()
        """Claimed ahead (``prefetch``), waiting for a slot; heartbeated like running jobs."""
        self._mean_duration: float | None = None
        self._requeues = 0
        """Outcomes recorded that put a job back to pending (retry, snooze, release)."""
        self._requeues_claimed = 0
        """How many of those were written before a claim began, so that claim could see them."""
        self._tg: asyncio.TaskGroup | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._cancel_requested: set[int] = set()
        self._limited: list[str] = []
        self._limited_at = float("-inf")
        self._breakers = Breakers(app, self.name)
        self._backend: Backend | None = None
        self._completer: Completer | None = None
        self.processed = 0
        self.scheduler: Scheduler | None = None

    # -- control ------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """First call: stop claiming and drain. Second call: skip the drain wait."""
        if self._stopping.is_set():
            self._forced.set()
        self._stopping.set()
        self._wake.set()
        self._slot_freed.set()  # a producer waiting for a slot (all busy) must see the stop

    def _on_wake(self, queue: str) -> None:
        if self.config.queues is None or queue in self.config.queues or queue == "*":
            self._wake.set()

    # -- the whole worker ---------------------------------------------------------------------

    async def run(self, *, burst: bool = False) -> None:
        """Work until stopped; with ``burst``, return once nothing is ready to run."""
        if not await self.app.wait_for_database(self._stopping):
            return  # asked to stop before the database ever answered
        self._backend = backend = await self.app.backend()
        try:
            await backend.warm_up()
        except BackendError as exc:  # only a head start: the loop below copes with outages
            log.warning("warm-up failed (%s); going on", exc)
        loop = asyncio.get_running_loop()

        def wake_from_any_thread(queue: str) -> None:
            loop.call_soon_threadsafe(self._on_wake, queue)

        unsubscribe = self.app.add_waker(wake_from_any_thread)
        pool = ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="skiplock-job")
        self._pool = pool
        self._completer = completer = Completer(backend, self.config.completion_batch)
        log.info(
            "worker %s started: queues=%s concurrency=%d backend=%s",
            self.name,
            ",".join(self.config.queues) if self.config.queues else "*",
            self.config.concurrency,
            mask_url(backend.url),
        )
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                tg.create_task(completer.run(), name="skiplock-completer")
                services = [
                    tg.create_task(self._maintenance(backend), name="skiplock-maintenance"),
                    tg.create_task(self._canceller(backend), name="skiplock-canceller"),
                    tg.create_task(prune_forever(backend, self.config), name="skiplock-pruner"),
                ]
                if not burst:  # a burst never idles, so it has nothing to be woken from
                    notifier = listen_forever(backend, self._on_wake, self._wake)
                    services.append(tg.create_task(notifier, name="skiplock-notifier"))
                if self.config.scheduler and self.app.schedules:
                    self.scheduler = Scheduler(self.app, backend)
                    services.append(tg.create_task(self.scheduler.run(), name="skiplock-scheduler"))
                await self._produce(backend, burst)
                await self._drain()
                for service in services:
                    service.cancel()
                completer.close()
        finally:
            unsubscribe()
            pool.shutdown(wait=False, cancel_futures=True)
        log.info("worker %s stopped after %d jobs", self.name, self.processed)

    # -- producer -----------------------------------------------------------------------------

    async def _produce(self, backend: Backend, burst: bool) -> None:
        failures = 0
        while not self._stopping.is_set():
            self._start_ready()
            free = self.config.concurrency - len(self._running)
            room = free + self._prefetch_depth() - len(self._ready)
            if room <= 0:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            limit = min(room, self.config.claim_batch)
            self._wake.clear()
            assert self._completer is not None
            if self._completer.idle:  # every outcome so far is in the table: this claim sees it
                self._requeues_claimed = self._requeues
            try:
                jobs = await self._claim(backend, limit)
                failures = 0
            except BackendError as exc:
                failures += 1
                delay = random.uniform(0, min(MAX_BACKOFF_S, 0.2 * 2**failures))
                log.warning("claim failed (%s); retrying in %.1fs", exc, delay)
                await _wait(self._stopping, delay)
                continue
            self._ready.extend(jobs)
            self._start_ready()
            if len(jobs) == limit:
                continue
            if burst:  # the queue ran short: done once nothing is left anywhere
                if await self._burst_done():
                    return
                continue
            await _wait(self._wake, self.config.poll_interval)

    async def _claim(self, backend: Backend, limit: int) -> list[ClaimedJob]:
        """The ordinary claim, then each limited queue's own (which knows its global limits)."""
        jobs = await backend.job_get_available(self._claim_params(limit))
        loop = asyncio.get_running_loop()
        if loop.time() - self._limited_at >= self.config.poll_interval:
            self._limited = [q for q in await backend.queue_limited() if self._serves(q)]
            self._limited_at = loop.time()
        for queue in self._limited:
            room = limit - len(jobs)
            if room <= 0:
                break
            jobs += await backend.job_get_available_limited(queue, self._claim_params(room))
        return jobs

    def _start_ready(self) -> None:
        """Start claimed jobs while there are free slots (not once stopping)."""
        assert self._tg is not None and self._pool is not None
        while self._ready and len(self._running) < self.config.concurrency:
            if self._stopping.is_set():
                return
            job = self._ready.popleft()
            task = self._tg.create_task(
                self._run_job(job, self._pool), name=f"skiplock-job-{job.id}"
            )
            self._running[job.id] = (task, job)

    def _prefetch_depth(self) -> int:
        """How many jobs to hold claimed beyond the free slots (WorkerConfig.prefetch)."""
        if self.config.prefetch is not None:
            return self.config.prefetch
        mean = self._mean_duration
        if mean is None or mean > PREFETCH_SHORT_JOB_S:
            return 0
        return self.config.concurrency

    def _serves(self, queue: str) -> bool:
        return self.config.queues is None or queue in self.config.queues

    async def _burst_done(self) -> bool:
        """Burst mode ends once a claim came up short, nothing is running, every outcome is
        written, and none of those outcomes put a job back to pending since that claim."""
        assert self._completer is not None
        if self._running or self._ready:
            self._slot_freed.clear()
            await self._slot_freed.wait()
            return False
        if not self._completer.idle:
            await self._completer.wait_idle()
        # a retry written after the last claim began may be due now: claim once more
        return self._requeues_claimed == self._requeues

    def _claim_params(self, limit: int) -> ClaimParams:
        return ClaimParams(
            queues=self.config.queues,
            limit=limit,
            worker=self.name,
            lease_token=f"{self._token_prefix}:{next(self._claims)}",
            default_lease=self.config.default_lease,
            lease_margin=self.config.lease_margin,
        )

    # -- one job ------------------------------------------------------------------------------

    async def _run_job(self, job: ClaimedJob, pool: ThreadPoolExecutor) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            decision = await execute(self.app, job, pool)
        except asyncio.CancelledError:
            if job.id in self._cancel_requested:
                self._cancel_requested.discard(job.id)
                error = error_record(job.attempt, Cancel("cancelled by request while running"))
                decision = Decision(Disposition.CANCEL, error=error)
            else:
                decision = Decision(Disposition.RELEASE)  # shutdown: back to pending, unspent
            self._record(job, decision, loop.time() - started)
            raise
        finally:
            self._running.pop(job.id, None)
            self._start_ready()  # the next claimed job takes the slot at once
            self._slot_freed.set()
        duration = loop.time() - started
        mean = self._mean_duration
        self._mean_duration = duration if mean is None else mean + 0.1 * (duration - mean)
        self._record(job, decision, duration)

    def _record(self, job: ClaimedJob, decision: Decision, duration: float) -> None:
        assert self._completer is not None
        self._completer.put(
            Completion(
                job.id,
                job.lease_token,
                decision.disposition,
                decision.delay_s,
                decision.error,
                job.lease_s,
            )
        )
        self.processed += 1
        if decision.disposition in (Disposition.RETRY, Disposition.SNOOZE, Disposition.RELEASE):
            self._requeues += 1
        if decision.disposition in (Disposition.RETRY, Disposition.DEAD):
            assert self._backend is not None
            self._breakers.count_failure(self._backend, job.task)
        level = logging.INFO if decision.error is None else logging.WARNING
        if log.isEnabledFor(level):
            reason = f" error={decision.error['message']!r}" if decision.error else ""
            log.log(
                level,
                "job=%d task=%s queue=%s attempt=%d/%d duration=%.3fs outcome=%s%s",
                job.id,
                job.task,
                job.queue,
                job.attempt,
                job.max_attempts,
                duration,
                decision.outcome,
                reason,
            )

    # -- shutdown -----------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Let running jobs finish within the grace period, then release the rest."""
        self._release_ready()
        if self._running:
            log.info(
                "stopping: waiting up to %.0fs for %d running jobs",
                self.config.shutdown_timeout,
                len(self._running),
            )
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.config.shutdown_timeout
            while self._running and not self._forced.is_set():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                self._slot_freed.clear()
                await _wait_any(self._slot_freed, self._forced, timeout=remaining)
        leftover = [task for task, _ in self._running.values()]
        if leftover:
            log.warning("releasing %d unfinished jobs back to pending", len(leftover))
            for task in leftover:
                task.cancel()
            await asyncio.gather(*leftover, return_exceptions=True)

    def _release_ready(self) -> None:
        """Jobs claimed ahead never started: back to pending, their attempt given back."""
        assert self._completer is not None
        if self._ready:
            log.info("releasing %d jobs claimed ahead back to pending", len(self._ready))
        while self._ready:
            job = self._ready.popleft()
            self._completer.put(
                Completion(job.id, job.lease_token, Disposition.RELEASE, lease_s=job.lease_s)
            )

    # -- background services ------------------------------------------------------------------

    async def _maintenance(self, backend: Backend) -> None:
        """Heartbeat the leases this worker holds; reclaim leases that expired anywhere."""
        loop = asyncio.get_running_loop()
        last_reclaim = loop.time()
        while True:
            await asyncio.sleep(self._beat_interval())
            try:
                await self._heartbeat(backend)
                if loop.time() - last_reclaim >= self.config.maintenance_interval:
                    last_reclaim = loop.time()
                    reclaimed = await backend.job_reclaim_expired()
                    if reclaimed:
                        log.warning(
                            "reclaimed %d jobs whose lease expired: %s",
                            len(reclaimed),
                            reclaimed[:20],
                        )
            except BackendError as exc:
                log.warning("maintenance failed (%s); will retry", exc)

    async def _canceller(self, backend: Backend) -> None:
        """Cancel, within about a second, running jobs a person asked to cancel."""
        while True:
            await asyncio.sleep(CANCEL_POLL_S)
            if not self._running:
                continue
            try:
                wanted = await backend.job_cancel_requested(list(self._running))
            except BackendError as exc:
                log.warning("could not check for cancellations (%s)", exc)
                continue
            for job_id in wanted:
                entry = self._running.get(job_id)
                if entry is not None and job_id not in self._cancel_requested:
                    log.info("job %d: cancel requested; cancelling it", job_id)
                    self._cancel_requested.add(job_id)
                    entry[0].cancel()

    def _beat_interval(self) -> float:
        """A third of the shortest lease held, so two beats can fail before it expires."""
        leases = [lease for _, _, lease in self._leases() if lease]
        shortest = min(leases, default=HEARTBEAT_INTERVAL_S * 3)
        return max(
            MIN_BEAT_S, min(HEARTBEAT_INTERVAL_S, self.config.maintenance_interval, shortest / 3)
        )

    def _leases(self) -> list[tuple[int, str, float | None]]:
        """Every lease this worker holds, as (job id, token, length): jobs running, claimed
        ahead, or finished with the outcome not yet written (say the database is away)."""
        assert self._completer is not None
        jobs = [job for _, job in self._running.values()] + list(self._ready)
        return [(job.id, job.lease_token, job.lease_s) for job in jobs] + [
            (c.job_id, c.lease_token, c.lease_s) for c in self._completer.unwritten()
        ]

    async def _heartbeat(self, backend: Backend) -> None:
        held = [(job_id, token) for job_id, token, _ in self._leases()]
        if not held:
            return
        kept = set(
            await backend.job_heartbeat_many(
                held, self.config.default_lease, self.config.lease_margin
            )
        )
        lost = {(job_id, token) for job_id, token in held if job_id not in kept}
        if lost:
            self._ready = collections.deque(
                job for job in self._ready if (job.id, job.lease_token) not in lost
            )
        for job_id, token in held:
            entry = self._running.get(job_id)
            if job_id not in kept and entry is not None and entry[1].lease_token == token:
                log.warning(
                    "job %d: lease lost while running (reclaimed elsewhere); cancelling it here",
                    job_id,
                )
                entry[0].cancel()


CANCEL_POLL_S = 1.0


async def _wait_any(*events: asyncio.Event, timeout: float) -> None:
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
