"""The ledger: every lease this worker holds, and the phase of each.

One owner for what the worker holds, so no service rebuilds it from another's internals.
The producer asks it for room, the runner moves jobs through it, the completer marks their
outcomes written (or lost); the lease keeper, the canceller and ``Worker.status()`` only
read it. A lease goes

    claimed ──start──> running ──finish──> finishing ──written──> written
       │                  │                    │
       ├──give_back──> releasing ──written──> written
       └── lost (another worker owns it now), from any phase a lease is held in

and every other move is a bug, refused with ``LedgerError`` (the table is ``TRANSITIONS``,
tested whole in tests/test_ledger.py). Held, and so heartbeated, means claimed, running,
finishing or releasing: an outcome not yet written keeps its lease, or another worker would
run the job again after an outage (docs/design.md, "A finished job keeps its lease until its
outcome is written"). A claim of a job this worker holds under another token proves the old
lease lost (it lapsed and was swept): ``take`` drops the old one, so its stale attempt is
cancelled before the new one starts. Everything is a dict keyed by job id or a deque, O(1)
per job; only a lost lease (rare) costs a pass over the jobs claimed ahead.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import time
from collections.abc import Callable, Iterable
from typing import NoReturn

from .._job import ClaimedJob, Completion, Disposition
from .._job_log import LogBuffer
from .claim_window import ClaimWindow

REQUEUES = frozenset({Disposition.RETRY, Disposition.SNOOZE, Disposition.RELEASE})
"""The outcomes that put a job back to pending (counted: burst mode claims once more)."""


class Phase(enum.StrEnum):
    NEW = "new"
    """Not held yet: a job a claim just returned."""
    CLAIMED = "claimed"
    """Leased, waiting for a slot (claimed ahead)."""
    RUNNING = "running"
    """Its code runs in a slot."""
    FINISHING = "finishing"
    """Ended; its outcome is with the completer, not yet written."""
    RELEASING = "releasing"
    """Given back unstarted; its release is with the completer, not yet written."""
    WRITTEN = "written"
    """Its outcome is in the table: no longer held."""
    LOST = "lost"
    """Another worker owns it now: no longer held."""


class Verb(enum.StrEnum):
    TAKE = "take"
    START = "start"
    FINISH = "finish"
    GIVE_BACK = "give_back"
    WRITTEN = "written"
    LOST = "lost"


TRANSITIONS: dict[tuple[Phase, Verb], Phase] = {
    (Phase.NEW, Verb.TAKE): Phase.CLAIMED,
    (Phase.CLAIMED, Verb.START): Phase.RUNNING,
    (Phase.CLAIMED, Verb.GIVE_BACK): Phase.RELEASING,
    (Phase.CLAIMED, Verb.LOST): Phase.LOST,
    (Phase.RUNNING, Verb.FINISH): Phase.FINISHING,
    (Phase.RUNNING, Verb.LOST): Phase.LOST,
    (Phase.FINISHING, Verb.WRITTEN): Phase.WRITTEN,
    (Phase.FINISHING, Verb.LOST): Phase.LOST,
    (Phase.RELEASING, Verb.WRITTEN): Phase.WRITTEN,
    (Phase.RELEASING, Verb.LOST): Phase.LOST,
    (Phase.LOST, Verb.FINISH): Phase.LOST,  # the cancelled attempt of a lost lease ended
}
"""Every allowed (phase, verb) -> next phase; any pair not here is a bug."""

_NEXT: dict[Verb, dict[Phase, Phase]] = {verb: {} for verb in Verb}
for (_phase, _verb), _to in TRANSITIONS.items():
    _NEXT[_verb][_phase] = _to
# The table by verb, and the phases, as module names: the verbs on every job's path read
# them without a call or an enum attribute lookup (this is the claim/complete hot path).
_ON_START = _NEXT[Verb.START]
_ON_FINISH = _NEXT[Verb.FINISH]
_ON_WRITTEN = _NEXT[Verb.WRITTEN]
_TAKEN = TRANSITIONS[Phase.NEW, Verb.TAKE]
_RUNNING = Phase.RUNNING
_FINISHING = Phase.FINISHING
_CLAIMED = Phase.CLAIMED


class LedgerError(RuntimeError):
    """A lease moved in a way the ledger's table refuses: a bug in the worker, not the job."""


def step(phase: Phase, verb: Verb) -> Phase:
    """The phase ``verb`` moves a lease in ``phase`` to; LedgerError if the table refuses."""
    to = _NEXT[verb].get(phase)
    if to is None:
        raise LedgerError(f"cannot {verb.value} a lease that is {phase.value}")
    return to


class Lease:
    """One lease held: the job as claimed, its phase, and its attempt while it has a slot."""

    __slots__ = ("in_slot", "job", "log", "phase", "started_at", "task")

    def __init__(self, job: ClaimedJob) -> None:
        self.job = job
        self.phase = _TAKEN
        """Born by ``take``: the table's (new, take) row."""
        self.started_at = 0.0
        """When it started (the ledger's clock): how long the slots have been busy."""
        self.task: asyncio.Future[None] | None = None
        """The attempt's Task, or a sync job's ``SyncAttempt`` (the runner cancels it: a
        person's cancel, a lost lease, the end of a drain)."""
        self.in_slot = False
        """Its attempt occupies a slot: from ``start`` until ``finish``, lost or not."""
        self.log: LogBuffer | None = None
        """Its attempt's log while it runs (its task keeps logs: ``job_log=True``)."""

    def __repr__(self) -> str:
        return f"<Lease {self.job.id}:{self.job.lease_token} {self.phase.value}>"


class Ledger:
    """Every lease the worker holds, by job id; the slots; the claim window's inputs."""

    def __init__(
        self,
        concurrency: int,
        window: ClaimWindow | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.concurrency = concurrency
        self.window = window or ClaimWindow(concurrency)
        """Prefetch sizing; the ledger feeds it each finished job's duration."""
        self._clock = clock
        self._held: dict[int, Lease] = {}
        """Every lease held (claimed, running, finishing, releasing), by job id."""
        self._claimed: collections.deque[Lease] = collections.deque()
        """The claimed ones in claim order: the next to start is the first."""
        self._running: dict[int, Lease] = {}
        """The running ones, in start order (the last started is the last)."""
        self._busy = 0
        """Slots occupied: running attempts, and lost ones not yet ended."""
        self.requeues = 0
        """Outcomes that put a job back to pending (retry, snooze, release)."""
        self.slot_freed = asyncio.Event()
        """Set when an attempt ends (a slot frees) and when the worker holds its starts."""
        self.stopping = False
        """Set by ``hold``: no job starts any more."""

    # -- verbs --------------------------------------------------------------------------------

    def take(self, jobs: Iterable[ClaimedJob]) -> list[Lease]:
        """Jobs a claim just returned, in as claimed. Returns the leases they displaced: a
        job held under another token lapsed and was swept while we held it, so the old
        lease is lost (its attempt, if it runs, is for the caller to cancel)."""
        displaced: list[Lease] = []
        held, claimed = self._held, self._claimed
        for job in jobs:
            old = held.get(job.id)
            if old is not None:
                if old.job.lease_token == job.lease_token:
                    self._move(old, Verb.TAKE)  # the same lease twice: refused, loudly
                self._lose(old)
                displaced.append(old)
            lease = Lease(job)
            held[job.id] = lease
            claimed.append(lease)
        return displaced

    def start_next(self) -> Lease | None:
        """The first claimed lease, started in a free slot (None: none claimed, no slot
        free, or held): ``next_ready`` and ``start`` in one call, for the runner's loop over
        every job (the caller sets the lease's ``task`` once it made it)."""
        claimed = self._claimed
        if not claimed or self._busy >= self.concurrency or self.stopping:
            return None
        lease = claimed[0]
        to = _ON_START.get(lease.phase)
        if to is None:
            self._refuse(lease, Verb.START)
        claimed.popleft()
        self._occupy(lease, to)
        return lease

    def next_ready(self) -> Lease | None:
        """The claimed lease to start now: the first, while a slot is free and not held."""
        if self._claimed and self._busy < self.concurrency and not self.stopping:
            return self._claimed[0]
        return None

    def start(self, lease: Lease, task: asyncio.Future[None] | None = None) -> None:
        """A claimed lease's attempt starts in a free slot (``task`` runs it)."""
        if self._busy >= self.concurrency:
            raise LedgerError(f"{lease!r}: started with every slot busy")
        to = _ON_START.get(lease.phase)
        if to is None:
            self._refuse(lease, Verb.START)
        claimed = self._claimed
        if claimed[0] is lease:
            claimed.popleft()
        else:
            claimed.remove(lease)
        self._occupy(lease, to)
        lease.task = task

    def _occupy(self, lease: Lease, running: Phase) -> None:
        """A lease taken off the claimed ones takes a slot: running from now."""
        lease.phase = running
        lease.started_at = self._clock()
        lease.in_slot = True
        self._running[lease.job.id] = lease
        self._busy += 1

    def finish(self, lease: Lease, disposition: Disposition, duration: float | None) -> None:
        """An attempt ended and its outcome went to the completer: its slot frees, and its
        lease is held until the outcome is written (a lost one is held no more).
        ``duration``: how long it ran, for the claim window (None: cancelled, which says
        nothing of how long the job takes)."""
        if not lease.in_slot:
            raise LedgerError(f"{lease!r}: finished without a slot")
        was = lease.phase
        to = _ON_FINISH.get(was)
        if to is None:
            self._refuse(lease, Verb.FINISH)
        lease.phase = to
        if was is _RUNNING:
            del self._running[lease.job.id]
        lease.in_slot = False
        lease.task = None
        self._busy -= 1
        if duration is not None:
            self.window.job_took(duration)
        if disposition in REQUEUES:
            self.requeues += 1
        self.slot_freed.set()

    def give_back(self, keep: int) -> list[Lease]:
        """Claimed leases beyond the first ``keep``, newest first, moved to releasing: the
        caller hands their releases (attempt given back) to the completer."""
        given: list[Lease] = []
        claimed = self._claimed
        while len(claimed) > keep:
            lease = claimed.pop()
            self._move(lease, Verb.GIVE_BACK)
            given.append(lease)
        return given

    def written(self, job_id: int, token: str) -> None:
        """The completer wrote this lease's outcome (or release): no longer held. A lease
        already lost (or replaced by a new claim of the job) is not held: nothing to do."""
        lease = self._held.get(job_id)
        if lease is None or lease.job.lease_token != token:
            return
        to = _ON_WRITTEN.get(lease.phase)
        if to is None:
            self._refuse(lease, Verb.WRITTEN)
        lease.phase = to
        del self._held[job_id]

    def written_all(self, batch: Iterable[Completion]) -> None:
        """``written`` for each outcome of a batch the completer wrote whole: one call a
        batch, not one a job."""
        held, on_written = self._held, _ON_WRITTEN
        for c in batch:
            lease = held.get(c.job_id)
            if lease is None or lease.job.lease_token != c.lease_token:
                continue
            to = on_written.get(lease.phase)
            if to is None:
                self._refuse(lease, Verb.WRITTEN)
            lease.phase = to
            del held[c.job_id]

    def lost(self, job_id: int, token: str) -> Lease | None:
        """Another worker owns this lease now (a beat found it gone, or an outcome's write
        was refused): no longer held. Returns the lease, or None if it was not held; if its
        attempt still has a slot (``in_slot``), the caller cancels it."""
        lease = self._held.get(job_id)
        if lease is None or lease.job.lease_token != token:
            return None
        self._lose(lease)
        return lease

    def hold(self) -> None:
        """Start no more jobs (the worker is stopping). Wakes a producer waiting for a
        slot: with every slot busy it would otherwise not see the stop until a job ended."""
        self.stopping = True
        self.slot_freed.set()

    # -- queries ------------------------------------------------------------------------------

    def held(self) -> list[tuple[int, str, float | None]]:
        """Every lease to heartbeat, as (job id, token, lease length): claimed, running,
        and finishing or releasing with the outcome not yet written."""
        return [
            (lease.job.id, lease.job.lease_token, lease.job.lease_s)
            for lease in self._held.values()
        ]

    def segments(self) -> frozenset[int] | None:
        """The live segments the held jobs were claimed from (PostgreSQL), which the beat
        reads alone; None if any job's is unknown (SQLite, or a job claimed without one)."""
        found: set[int] = set()
        for lease in self._held.values():
            segment = lease.job.segment
            if segment is None:
                return None
            found.add(segment)
        return frozenset(found)

    def lanes(self) -> dict[int, str]:
        """The lane of each held job not in ``default`` (the beat writes each lane apart);
        empty in a database of one lane."""
        return {
            lease.job.id: lease.job.lane
            for lease in self._held.values()
            if lease.job.lane != "default"
        }

    def started(self) -> frozenset[tuple[int, str]]:
        """The leases whose code has started (running, or finished with the outcome still
        to write), which the beat marks started in their rows."""
        return frozenset(
            (lease.job.id, lease.job.lease_token)
            for lease in self._held.values()
            if lease.phase is _RUNNING or lease.phase is _FINISHING
        )

    @property
    def free(self) -> int:
        """Slots free now."""
        return self.concurrency - self._busy

    @property
    def busy(self) -> int:
        """Slots busy now (an attempt whose lease was lost occupies one until it ends)."""
        return self._busy

    @property
    def claimed_ahead(self) -> int:
        """Leases claimed and waiting for a slot."""
        return len(self._claimed)

    @property
    def mean_duration(self) -> float | None:
        """The moving average of a job's duration (None before one finished)."""
        return self.window.mean_duration

    def busy_for(self) -> float:
        """How long the most recently started running job has run: every slot has been
        busy at least this long (0 while a slot is free)."""
        if self._busy < self.concurrency or not self._running:
            return 0.0
        last = next(reversed(self._running.values()))
        return self._clock() - last.started_at

    def room(self) -> int:
        """How many more jobs the producer may claim: the free slots plus the claim
        window's depth, less what is claimed ahead already (0 or less: none)."""
        return self.free + self.window.depth(self.busy_for()) - len(self._claimed)

    def running_ids(self) -> list[int]:
        """The ids of the jobs running now (the canceller asks which a person cancelled)."""
        return list(self._running)

    def attempts(self) -> list[asyncio.Future[None]]:
        """The tasks of the jobs running now (the drain cancels those left at its end)."""
        return [lease.task for lease in self._running.values() if lease.task is not None]

    def running(self, job_id: int) -> Lease | None:
        """The lease of this job if it is running now."""
        return self._running.get(job_id)

    def lease(self, job_id: int) -> Lease | None:
        """The lease held for this job, in any phase, or None."""
        return self._held.get(job_id)

    # -- the table ----------------------------------------------------------------------------

    def _move(self, lease: Lease, verb: Verb) -> None:
        to = _NEXT[verb].get(lease.phase)
        if to is None:
            self._refuse(lease, verb)
        lease.phase = to

    @staticmethod
    def _refuse(lease: Lease, verb: Verb) -> NoReturn:
        raise LedgerError(
            f"job {lease.job.id} (lease {lease.job.lease_token}): cannot {verb.value} "
            f"a lease that is {lease.phase.value}"
        )

    def _lose(self, lease: Lease) -> None:
        was = lease.phase
        self._move(lease, Verb.LOST)
        del self._held[lease.job.id]
        if was is _CLAIMED:
            self._claimed.remove(lease)
        elif was is _RUNNING:
            del self._running[lease.job.id]
