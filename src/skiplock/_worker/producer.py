"""The producer: claims batches while the runner has room, and sleeps until woken.

It claims up to the free slots plus the prefetch depth, hands the jobs to the runner and
re-arms the lease keeper. When a claim comes back short it waits for a wake-up (notifier,
in-process enqueue) or the poll backstop. In burst mode it ends once nothing is left to run.
While the database is away it retries at least once a second (and at once when another
service reaches it), so claims resume within about a second of the database answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import math

from .._backends import Backend
from .._backends.base import ClaimParams
from .._config import WorkerConfig
from .._job import ClaimedJob
from .._outage import Outage, retry_delay
from .._service import Service
from ..errors import BackendUnavailable
from .completer import Completer
from .leases import LeaseKeeper
from .runner import Runner
from .signals import WorkerSignals

CLAIM_RETRY_FIRST_S = 0.1
CLAIM_RETRY_CAP_S = 1.0
"""The longest the producer waits between claims while the database is away: claims resume
within about a second of it answering (an outage costs at most one claim a second)."""
PREFETCH_SHORT_JOB_S = 1.0
"""Claim ahead (by default) only while jobs take less than this on average; once every slot
has been busy this long, jobs claimed ahead are given back for idle workers elsewhere."""
PREFETCH_CEILING = 1000
"""The most jobs the adaptive window holds claimed ahead (each one leased and heartbeated)."""
PREFETCH_COVER = 2.0
"""How many claim round trips the adaptive window covers: the one in flight, and one spare
for a slow one (a completer flush sharing the database, a checkpoint)."""
SHORTEST_JOB_S = 1e-5
"""Mean durations below this count as this (a no-op job), so the window stays finite."""


async def _wait(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait for ``event`` at most ``timeout`` seconds; True if it was set."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
    return event.is_set()


class Producer(Service):
    name = "producer"

    def __init__(
        self,
        backend: Backend,
        config: WorkerConfig,
        parts: tuple[Runner, Completer, LeaseKeeper],
        signals: WorkerSignals,
        *,
        token_prefix: str,
        burst: bool,
        outage: Outage | None = None,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.config = config
        self.runner, self.completer, self.leases = parts
        self.signals = signals
        self.burst = burst
        self.outage = outage or Outage()
        self.wake = asyncio.Event()
        self._token_prefix = token_prefix
        self._claims = itertools.count(1)
        self._failures = 0
        self._requeues_claimed = 0
        """How many requeues were written before a claim began, so that claim could see them."""
        self.last_claim_at: float | None = None
        """The loop time of the last claim that took a job (the worker registry reports it)."""
        self._limited: list[str] = []
        self._limited_at = float("-inf")
        self._claim_s: float | None = None
        """A moving average of one claim's round trip (the W in the window's Little's law)."""
        self._due_at = math.inf
        """The loop time the earliest job known not yet due comes due (inf: none known)."""

    def stop(self) -> None:
        self._stopped = True
        self.wake.set()

    def on_wake(self, queue: str) -> None:
        if self.config.queues is None or queue in self.config.queues or queue == "*":
            self.wake.set()
            self.signals.woke.fire(queue)

    def due_in(self, delay_s: float) -> None:
        """A job this worker put back to pending comes due in ``delay_s``: wake then."""
        due_at = asyncio.get_running_loop().time() + delay_s
        if due_at < self._due_at:
            self._due_at = due_at
            self.wake.set()  # the idle wait re-reads its deadline

    async def serve(self) -> None:
        while not self._stopped:
            room = self._room()
            if room <= 0:
                await self._wait_for_slot()
                continue
            limit = min(room, self.config.claim_batch)
            jobs = await self._try_claim(limit)
            if jobs is not None and len(jobs) < limit and not await self._idle():
                return

    async def _try_claim(self, limit: int) -> list[ClaimedJob] | None:
        """One claim; None when the database is away (reported to the shared outage, then
        a retry delay waited out, cut short by any wake-up, recovery included)."""
        try:
            jobs = await self._claim(limit)
        except BackendUnavailable as exc:
            self.mark_ready()  # now, not after the wait: retrying is its work while it is away
            self._failures += 1
            self.outage.failed(self.name, exc)
            delay = retry_delay(
                self._failures, first_s=CLAIM_RETRY_FIRST_S, cap_s=CLAIM_RETRY_CAP_S
            )
            await _wait(self.wake, delay)
            return None
        finally:
            self.mark_ready()
        self._failures = 0
        self.outage.answered()
        return jobs

    def _room(self) -> int:
        self.runner.start_ready()
        return self.runner.free + self._prefetch_depth() - len(self.runner.ready)

    async def _wait_for_slot(self) -> None:
        """Until a slot frees; meanwhile, once every slot has run one job for longer than a
        short job takes, give the jobs claimed ahead back (they would wait that long here)."""
        self.runner.slot_freed.clear()
        while not await _wait(self.runner.slot_freed, PREFETCH_SHORT_JOB_S):
            held_ahead = self.config.prefetch is None and self.runner.ready
            if held_ahead and self.runner.busy_for() >= PREFETCH_SHORT_JOB_S:
                self.runner.give_back(0)

    async def _idle(self) -> bool:
        """After a short claim: False when a burst is done, else True once it is time to
        claim again (woken, or the poll backstop)."""
        if self.burst:
            return not await self._burst_done()
        await self._sleep()
        return True

    async def _sleep(self) -> None:
        """Until woken, the next pending job comes due, or the poll backstop, the first.

        The database is asked when its next pending job comes due (a few index probes) only
        here, after a claim came up short, so a busy worker never asks it; the jobs this
        worker puts back itself wake it through ``due_in``."""
        loop = asyncio.get_running_loop()
        with contextlib.suppress(BackendUnavailable):  # the next claim meets the outage
            due_in = await self.backend.job_next_run_at()
            self._due_at = math.inf if due_in is None else loop.time() + max(due_in, 0.0)
        await _wait(
            self.wake, max(0.0, min(self.config.poll_interval_s, self._due_at - loop.time()))
        )
        if loop.time() >= self._due_at:
            self._due_at = math.inf

    async def _claim(self, limit: int) -> list[ClaimedJob]:
        self.wake.clear()
        if self.completer.idle:  # every outcome so far is in the table: this claim sees it
            self._requeues_claimed = self.runner.requeues
        loop = asyncio.get_running_loop()
        began = loop.time()
        jobs = await self._claim_all(limit)
        now = loop.time()
        took, mean = now - began, self._claim_s
        self._claim_s = took if mean is None else mean + 0.2 * (took - mean)
        self.runner.meter.claim(len(jobs), took)
        if jobs:
            self.last_claim_at = now
        self.runner.take(jobs)
        self.leases.rearm()
        self.signals.claimed.fire([job.id for job in jobs])
        return jobs

    async def _claim_all(self, limit: int) -> list[ClaimedJob]:
        """The ordinary claim, then each limited queue's own (which knows its global limits)."""
        jobs = await self.backend.job_get_available(self._claim_params(limit))
        loop = asyncio.get_running_loop()
        if loop.time() - self._limited_at >= self.config.poll_interval_s:
            self._limited = [q for q in await self.backend.queue_limited() if self._serves(q)]
            self._limited_at = loop.time()
        for queue in self._limited:
            room = limit - len(jobs)
            if room <= 0:
                break
            params = dataclasses.replace(self._claim_params(room), queues=(queue,))
            jobs += await self.backend.job_get_available_limited(params)
        return jobs

    def _prefetch_depth(self) -> int:
        """How many jobs to hold claimed beyond the free slots (WorkerConfig.prefetch).

        Adaptive by default, by Little's law: the jobs this worker's slots would start
        during ``PREFETCH_COVER`` claim round trips, at the mean job duration seen so far,
        so the runner never waits for a claim; at least ``concurrency``, at most
        ``PREFETCH_CEILING`` (or ``concurrency`` if that is larger).
        None before the first job finishes, and none while jobs are long (a long job is
        better left in the table for an idle worker)."""
        if self.config.prefetch is not None:
            return self.config.prefetch
        mean, claim_s = self.runner.mean_duration, self._claim_s
        if mean is None or claim_s is None or mean > PREFETCH_SHORT_JOB_S:
            return 0
        if self.runner.busy_for() >= PREFETCH_SHORT_JOB_S:  # turning long: hold none
            return 0
        concurrency = self.config.concurrency
        little = math.ceil(concurrency / max(mean, SHORTEST_JOB_S) * claim_s * PREFETCH_COVER)
        # Never below the concurrency: slots free in bursts (a batch started together ends
        # together), which an average rate does not see (W3 lost ~3 ms without this floor).
        return min(max(concurrency, little), max(PREFETCH_CEILING, concurrency))

    def _serves(self, queue: str) -> bool:
        return self.config.queues is None or queue in self.config.queues

    async def _burst_done(self) -> bool:
        """Burst mode ends once a claim came up short, nothing is running, every outcome is
        written, and none of those outcomes put a job back to pending since that claim."""
        if self.runner.running or self.runner.ready:
            await self._wait_for_slot()
            return False
        if not self.completer.idle:
            await self.completer.wait_idle()
        # a retry written after the last claim began may be due now: claim once more
        return self._requeues_claimed == self.runner.requeues

    def _claim_params(self, limit: int) -> ClaimParams:
        return ClaimParams(
            queues=self.config.queues,
            limit=limit,
            worker=self.config.name,
            lease_token=f"{self._token_prefix}:{next(self._claims)}",
            default_lease=self.config.default_lease_s,
            lease_margin=self.config.lease_margin_s,
        )
