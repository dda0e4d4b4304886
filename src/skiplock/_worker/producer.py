"""The producer: claims batches while the runner has room, and sleeps until woken.

It claims as many as the ledger has room for (the free slots plus the claim window's
prefetch depth), hands the jobs to the runner and re-arms the lease keeper. When a claim
comes back short it waits for a wake-up (notifier, in-process enqueue) or the poll backstop.
In burst mode it ends once nothing is left to run (parked waits already past their timeout
run first). While the database is away it retries at
least once a second (and at once when another service reaches it), so claims resume within
about a second of the database answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import math
from collections.abc import Awaitable, Callable

from .._backends import Backend
from .._backends.params import ClaimParams
from .._config import WorkerConfig
from .._job import ClaimedJob
from .._observe.meter import Meter
from .._outage import Outage, retry_delay
from .._service import Service
from ..errors import BackendUnavailable
from .claim_window import PREFETCH_SHORT_JOB_S
from .completer import Completer
from .leases import LeaseKeeper
from .ledger import Ledger
from .runner import Runner
from .signals import WorkerSignals

CLAIM_RETRY_FIRST_S = 0.1
CLAIM_RETRY_CAP_S = 1.0
"""The longest the producer waits between claims while the database is away: claims resume
within about a second of it answering (an outage costs at most one claim a second)."""

BURST_HELD_WAIT_S = 0.05
"""How long a burst worker waits before it claims again when a ready job it could not claim
is left (held by another session for the length of a transaction)."""


async def _wait(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait for ``event`` at most ``timeout`` seconds; True if it was set."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
    return event.is_set()


async def _claim_into(
    jobs: list[ClaimedJob], claim: Callable[[int], Awaitable[list[ClaimedJob]]], want: int
) -> bool:
    """Run one claim statement for up to ``want`` jobs, add them to ``jobs``; whether it
    came back short (fewer than asked: nothing more of its kind is ready for this worker)."""
    got = await claim(want)
    jobs += got
    return len(got) < want


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
        ledger: Ledger,
        outage: Outage | None = None,
        meter: Meter | None = None,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.config = config
        self.runner, self.completer, self.leases = parts
        self.ledger = ledger
        """What the worker holds: the room to claim, the slots, the claim window."""
        self.meter = meter or Meter()
        self.signals = signals
        self.burst = burst
        self.expiry = asyncio.Lock()
        """Held while this worker ends waits past their timeout (the wait timer, the rescuer's
        sweep and a burst's end share one, ``Worker``): the expiry skips rows another holds, so
        a burst that looked while another service of its own was ending a wait would see it
        neither waiting nor pending, and end with the job left to run."""
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
        self._keyed_at = float("-inf")
        """When the keyed claim last ran (loop time)."""
        self._keyed_took = False
        """Whether it took a job: while keyed jobs flow, the two claims take turns first."""
        self._turns = itertools.count()
        self._keyed_held: set[int] = set()
        """Keyed jobs this worker claimed whose outcomes are not written yet: each holds a
        slot of its key until its outcome is in the table."""
        self._due_at = math.inf
        """The loop time the earliest job known not yet due comes due (inf: none known)."""
        self._lane_turns = itertools.count()
        self._claim_began = 0.0
        """When the last claim began (loop time): a short claim saw every job due by then."""

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
            room = self.ledger.room()
            if room <= 0:
                await self._wait_for_slot()
                continue
            short = await self._try_claim(min(room, self.config.claim_batch))
            if short and not await self._idle():
                return

    async def _try_claim(self, limit: int) -> bool:
        """One claim round; whether it came back short (every statement found fewer jobs
        than it asked for). False too when the database is away: the outage is reported to
        the shared outage, then a retry delay waited out, cut short by any wake-up,
        recovery included."""
        try:
            short = await self._claim(limit)
        except BackendUnavailable as exc:
            self.mark_ready()  # now, not after the wait: retrying is its work while it is away
            self._failures += 1
            self.outage.failed(self.name, exc)
            delay = retry_delay(
                self._failures, first_s=CLAIM_RETRY_FIRST_S, cap_s=CLAIM_RETRY_CAP_S
            )
            await _wait(self.wake, delay)
            return False
        finally:
            self.mark_ready()
        self._failures = 0
        self.outage.answered()
        return short

    async def _wait_for_slot(self) -> None:
        """Until a slot frees; meanwhile, once every slot has run one job for longer than a
        short job takes, give the jobs claimed ahead back (they would wait that long here).
        Then give back what is held ahead beyond what the slots start within a short job's
        time at the mean duration now (``ClaimWindow.keep_ahead``)."""
        ledger = self.ledger
        ledger.slot_freed.clear()
        while not await _wait(ledger.slot_freed, PREFETCH_SHORT_JOB_S):
            if ledger.claimed_ahead and ledger.window.gives_back(ledger.busy_for()):
                self.runner.give_back(0)
        keep = ledger.window.keep_ahead()  # jobs turned slower than the window was sized for
        if keep is not None and ledger.claimed_ahead > keep:
            self.runner.give_back(keep)

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
        worker puts back itself wake it through ``due_in``. Nor when a wake-up came while the
        claim ran (a steady flow of jobs: each short claim finds the next notice waiting): the
        worker claims again at once, and the probe would only delay that claim."""
        if self.wake.is_set():
            return
        loop = asyncio.get_running_loop()
        with contextlib.suppress(BackendUnavailable):  # the next claim meets the outage
            lookback = loop.time() - self._claim_began  # a job due since is not missed
            dues = [
                await self.backend.job_next_run_at(lookback, lane) for lane in self.backend.lanes
            ]
            known = [d for d in dues if d is not None]
            due_in = min(known) if known else None
            self._due_at = math.inf if due_in is None else loop.time() + max(due_in, 0.0)
        await _wait(
            self.wake, max(0.0, min(self.config.poll_interval_s, self._due_at - loop.time()))
        )
        if loop.time() >= self._due_at:
            self._due_at = math.inf

    async def _claim(self, limit: int) -> bool:
        """One claim round of up to ``limit`` jobs; whether it came back short.

        What the round's statements committed is handed to the runner whatever happens
        after: a round is several statements, each its own transaction, and when a later
        one fails (a terminated session, a failover) the rows the earlier ones claimed are
        this worker's to run, not to leave leased and idle until their leases run out."""
        self.wake.clear()
        if self.completer.idle:  # every outcome so far is in the table: this claim sees it
            self._requeues_claimed = self.ledger.requeues
        loop = asyncio.get_running_loop()
        self._claim_began = began = loop.time()
        jobs: list[ClaimedJob] = []
        try:
            short = await self._claim_all(limit, jobs)
        finally:
            now = loop.time()
            took = now - began
            self.ledger.window.claim_took(took)
            self.meter.claim(len(jobs), took)
            if jobs:
                self.last_claim_at = now
            self.runner.take(jobs)
            self.leases.rearm()
            self.signals.claimed.fire([job.id for job in jobs])
        return short

    async def _claim_all(self, limit: int, jobs: list[ClaimedJob]) -> bool:
        """Each lane this database serves in turn (``backend.lanes``; one, ``default``,
        unless an App's directory shares several out), each one's claims naming it, the
        first lane of a round rotating so none is always last to the room; whether every
        lane came back short."""
        lanes = self.backend.lanes
        if len(lanes) == 1:
            return await self._claim_lane(lanes[0], limit, jobs)
        first = next(self._lane_turns) % len(lanes)
        short = True
        for lane in (*lanes[first:], *lanes[:first]):
            room = limit - len(jobs)
            if room <= 0:
                return False
            short &= await self._claim_lane(lane, room, jobs)
        return short

    async def _claim_lane(self, lane: str, limit: int, jobs: list[ClaimedJob]) -> bool:
        """In ``lane``: the ordinary claim and the keyed one, then each limited queue's own
        (which knows its global limits), each adding what it claimed to ``jobs`` as it
        returns; whether the round came back short.

        Short means every statement that ran found fewer jobs than it asked for: then none
        is left ready for this worker but what a wake-up or the poll will announce. A round
        that took fewer than ``limit`` is not short when a statement was simply given less
        room than the rest (the slot the ordinary claim leaves the keyed one): its queue may
        hold many more, and the worker claims again at once rather than idle a poll interval
        with a backlog (a PostgreSQL worker did, every poll interval: outcomes send no
        NOTIFY to wake it).

        The keyed claim (jobs with a concurrency key) costs a round trip, so it runs when
        there is reason to: while it takes jobs (then the two claims take turns going first,
        so neither kind starves the other of room), when the ordinary claim left room, and
        at least once a poll interval (the ordinary claim leaves it a slot then, so a worker
        saturated with unkeyed jobs still finds keyed ones)."""
        loop = asyncio.get_running_loop()
        overdue = loop.time() - self._keyed_at >= self.config.poll_interval_s
        # while keyed jobs flow, turns; else first only when it has no other way to a slot
        keyed_first = next(self._turns) % 2 == 1 if self._keyed_took else overdue and limit == 1
        short = True
        keyed = functools.partial(self._claim_keyed, lane)
        if keyed_first:
            short &= await _claim_into(jobs, keyed, limit)
        room = limit - len(jobs) - (1 if overdue and not keyed_first else 0)
        if room > 0:
            short &= await _claim_into(jobs, functools.partial(self._claim_ordinary, lane), room)
        if not keyed_first and len(jobs) < limit:
            short &= await _claim_into(jobs, keyed, limit - len(jobs))
        if loop.time() - self._limited_at >= self.config.poll_interval_s:
            self._limited = [q for q in await self.backend.queue_limited() if self._serves(q)]
            self._limited_at = loop.time()
        for queue in self._limited:
            room = limit - len(jobs)
            if room <= 0:
                break
            limited = functools.partial(self._claim_limited, lane, queue)
            short &= await _claim_into(jobs, limited, room)
        return short

    async def _claim_ordinary(self, lane: str, limit: int) -> list[ClaimedJob]:
        return await self.backend.job_get_available(self._claim_params(lane, limit))

    async def _claim_limited(self, lane: str, queue: str, limit: int) -> list[ClaimedJob]:
        params = dataclasses.replace(self._claim_params(lane, limit), queues=(queue,))
        return await self.backend.job_get_available_limited(params)

    async def _claim_keyed(self, lane: str, limit: int) -> list[ClaimedJob]:
        self._keyed_at = asyncio.get_running_loop().time()
        jobs = await self.backend.job_get_available_keyed(self._claim_params(lane, limit))
        self._keyed_took = bool(jobs)
        # a lease lost to another worker is never written here: its id goes with the lease
        held = self._keyed_held
        held.difference_update([i for i in held if self.ledger.lease(i) is None])
        held.update(job.id for job in jobs)
        return jobs

    def written(self, job_ids: list[int]) -> None:
        """A batch of outcomes is in the table: if it freed slots of keys (a keyed job of
        this worker finished, or was put back), claim again now rather than at the poll (an
        ordered key's next job waits for exactly this)."""
        held = self._keyed_held
        if held and not held.isdisjoint(job_ids):
            held.difference_update(job_ids)
            self.wake.set()

    def _serves(self, queue: str) -> bool:
        return self.config.queues is None or queue in self.config.queues

    async def _burst_done(self) -> bool:
        """Burst mode ends once a claim came up short, nothing is running, every outcome is
        written, and none of those outcomes put a job back to pending since that claim."""
        if self.ledger.busy or self.ledger.claimed_ahead:
            await self._wait_for_slot()
            return False
        if not self.completer.idle:
            await self.completer.wait_idle()
        # a retry written after the last claim began may be due now: claim once more
        if self._requeues_claimed != self.ledger.requeues:
            return False
        if await self._waits_timed_out():
            return False
        return not await self._ready_passed_over()

    async def _waits_timed_out(self) -> bool:
        """Whether parked waits whose timeout has passed were made pending now (a burst
        ends only when none is left: ``app.drain()`` runs a wait's timeout once it is due,
        with no sweep to wait for). True on an outage: the next claim meets it."""
        try:
            async with self.expiry:
                return bool(await self.backend.workflow_expire_waits())
        except BackendUnavailable:
            return True

    async def _ready_passed_over(self) -> bool:
        """Whether a ready job is left that the short claim passed over because another
        session held its row (PostgreSQL's rotation moving it to the long segment, an
        operator's update): a burst ended on the claim alone left 2,050 of 12,000 jobs
        pending. If one is, claim again after a short wait (the hold lasts a transaction)."""
        try:
            ready = False
            for lane in self.backend.lanes:
                ready = ready or await self.backend.job_ready_exists(self.config.queues, lane)
        except BackendUnavailable:
            return True  # the next claim meets the outage and waits it out
        if ready:
            await _wait(self.wake, min(self.config.poll_interval_s, BURST_HELD_WAIT_S))
        return ready

    def _claim_params(self, lane: str, limit: int) -> ClaimParams:
        return ClaimParams(
            queues=self.config.queues,
            limit=limit,
            worker=self.config.name,
            lease_token=f"{self._token_prefix}:{next(self._claims)}",
            default_lease=self.config.default_lease_s,
            lease_margin=self.config.lease_margin_s,
            lane=lane,
        )
