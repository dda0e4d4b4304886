"""The worker's ledger: every lease it holds and its phase, as a table-tested state machine.

Pure (no database, no worker): the table of every (phase, verb) pair, the same pairs driven
through the ledger's own verbs, and the bugs of docs/design.md that came from the job table
being shared (a stop not seen while waiting for a slot, the stale attempt of a re-claimed
job, an unwritten outcome's lease expiring) each as a ledger-level case.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from skiplock._job import ClaimedJob, Completion, Disposition
from skiplock._worker.claim_window import ClaimWindow
from skiplock._worker.ledger import Lease, Ledger, LedgerError, Phase, Verb, step

NOW = datetime(2026, 1, 1, tzinfo=UTC)
_tokens = itertools.count(1)


def job(job_id: int = 1, token: str | None = None, lease_s: float = 30.0) -> ClaimedJob:
    token = token if token is not None else f"w:{next(_tokens)}"
    return ClaimedJob(
        job_id, "t", "default", "[]", "{}", 0, 1, 3, None, token, NOW, NOW, lease_s=lease_s
    )


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- the table, pair by pair ------------------------------------------------------------------

X = None  # refused
ALLOWED: dict[Phase, dict[Verb, Phase | None]] = {
    Phase.NEW: {
        Verb.TAKE: Phase.CLAIMED, Verb.START: X, Verb.FINISH: X,
        Verb.GIVE_BACK: X, Verb.WRITTEN: X, Verb.LOST: X,
    },
    Phase.CLAIMED: {
        Verb.TAKE: X, Verb.START: Phase.RUNNING, Verb.FINISH: X,
        Verb.GIVE_BACK: Phase.RELEASING, Verb.WRITTEN: X, Verb.LOST: Phase.LOST,
    },
    Phase.RUNNING: {
        Verb.TAKE: X, Verb.START: X, Verb.FINISH: Phase.FINISHING,
        Verb.GIVE_BACK: X, Verb.WRITTEN: X, Verb.LOST: Phase.LOST,
    },
    Phase.FINISHING: {
        Verb.TAKE: X, Verb.START: X, Verb.FINISH: X,
        Verb.GIVE_BACK: X, Verb.WRITTEN: Phase.WRITTEN, Verb.LOST: Phase.LOST,
    },
    Phase.RELEASING: {
        Verb.TAKE: X, Verb.START: X, Verb.FINISH: X,
        Verb.GIVE_BACK: X, Verb.WRITTEN: Phase.WRITTEN, Verb.LOST: Phase.LOST,
    },
    Phase.WRITTEN: {
        Verb.TAKE: X, Verb.START: X, Verb.FINISH: X,
        Verb.GIVE_BACK: X, Verb.WRITTEN: X, Verb.LOST: X,
    },
    Phase.LOST: {
        Verb.TAKE: X, Verb.START: X, Verb.FINISH: Phase.LOST,  # a lost lease's attempt ends
        Verb.GIVE_BACK: X, Verb.WRITTEN: X, Verb.LOST: X,
    },
}  # fmt: skip

PAIRS = [(phase, verb, ALLOWED[phase][verb]) for phase in Phase for verb in Verb]


def test_the_table_names_every_phase_and_verb() -> None:
    assert set(ALLOWED) == set(Phase)
    assert all(set(row) == set(Verb) for row in ALLOWED.values())


@pytest.mark.parametrize(("phase", "verb", "to"), PAIRS, ids=[f"{p}-{v}" for p, v, _ in PAIRS])
def test_each_transition_is_allowed_or_refused(phase: Phase, verb: Verb, to: Phase | None) -> None:
    if to is None:
        with pytest.raises(LedgerError, match=f"cannot {verb.value} a lease that is {phase}"):
            step(phase, verb)
    else:
        assert step(phase, verb) is to


# -- the same pairs through the ledger's verbs --------------------------------------------------


def in_phase(ledger: Ledger, phase: Phase, job_id: int = 1) -> Lease:
    """A lease of a fresh job driven to ``phase`` through the ledger's own verbs."""
    (lease,) = [ledger.lease(j.id) for j in [job(job_id)] if not ledger.take([j])]
    assert lease is not None
    if phase is Phase.RELEASING:
        assert ledger.give_back(0) == [lease]
    elif phase is Phase.LOST:
        assert ledger.lost(job_id, lease.job.lease_token) is lease
    elif phase is not Phase.CLAIMED:
        ledger.start(lease)
        if phase is not Phase.RUNNING:
            ledger.finish(lease, Disposition.SUCCEED, 0.01)
            if phase is Phase.WRITTEN:
                ledger.written(job_id, lease.job.lease_token)
    assert lease.phase is phase
    return lease


IGNORED = "ignored"
"""A report about a lease the ledger no longer holds: nothing happens."""
UNTOUCHED = "untouched"
"""A verb that addresses other leases (give_back takes only claimed ones)."""
Outcome = Phase | type[LedgerError] | str
THROUGH_LEDGER: dict[Phase, dict[Verb, Outcome]] = {
    Phase.CLAIMED: {
        Verb.TAKE: LedgerError, Verb.START: Phase.RUNNING, Verb.FINISH: LedgerError,
        Verb.GIVE_BACK: Phase.RELEASING, Verb.WRITTEN: LedgerError, Verb.LOST: Phase.LOST,
    },
    Phase.RUNNING: {
        Verb.TAKE: LedgerError, Verb.START: LedgerError, Verb.FINISH: Phase.FINISHING,
        Verb.GIVE_BACK: UNTOUCHED, Verb.WRITTEN: LedgerError, Verb.LOST: Phase.LOST,
    },
    Phase.FINISHING: {
        Verb.TAKE: LedgerError, Verb.START: LedgerError, Verb.FINISH: LedgerError,
        Verb.GIVE_BACK: UNTOUCHED, Verb.WRITTEN: Phase.WRITTEN, Verb.LOST: Phase.LOST,
    },
    Phase.RELEASING: {
        Verb.TAKE: LedgerError, Verb.START: LedgerError, Verb.FINISH: LedgerError,
        Verb.GIVE_BACK: UNTOUCHED, Verb.WRITTEN: Phase.WRITTEN, Verb.LOST: Phase.LOST,
    },
    Phase.WRITTEN: {
        Verb.TAKE: IGNORED, Verb.START: LedgerError, Verb.FINISH: LedgerError,
        Verb.GIVE_BACK: UNTOUCHED, Verb.WRITTEN: IGNORED, Verb.LOST: IGNORED,
    },
    Phase.LOST: {
        Verb.TAKE: IGNORED, Verb.START: LedgerError, Verb.FINISH: LedgerError,
        Verb.GIVE_BACK: UNTOUCHED, Verb.WRITTEN: IGNORED, Verb.LOST: IGNORED,
    },
}  # fmt: skip
"""What each verb does to a lease in each phase a ledger can hold it in. ``take`` of a job
no longer held starts a new lease (the old one is ignored); a lost lease here had no slot
(it was lost while claimed): the one lost while running is its own case below."""


def apply(ledger: Ledger, lease: Lease, verb: Verb) -> None:
    j = lease.job
    actions: dict[Verb, Callable[[], object]] = {
        Verb.TAKE: lambda: ledger.take([job(j.id, j.lease_token)]),
        Verb.START: lambda: ledger.start(lease),
        Verb.FINISH: lambda: ledger.finish(lease, Disposition.SUCCEED, 0.01),
        Verb.GIVE_BACK: lambda: ledger.give_back(0),
        Verb.WRITTEN: lambda: ledger.written(j.id, j.lease_token),
        Verb.LOST: lambda: ledger.lost(j.id, j.lease_token),
    }
    actions[verb]()


HELD = (Phase.CLAIMED, Phase.RUNNING, Phase.FINISHING, Phase.RELEASING)
LEDGER_CASES = [(p, v, o) for p, row in THROUGH_LEDGER.items() for v, o in row.items()]


@pytest.mark.parametrize(
    ("phase", "verb", "outcome"), LEDGER_CASES, ids=[f"{p}-{v}" for p, v, _ in LEDGER_CASES]
)
def test_each_verb_on_a_lease_in_each_phase(phase: Phase, verb: Verb, outcome: Outcome) -> None:
    ledger = Ledger(concurrency=4)
    lease = in_phase(ledger, phase)
    before = sorted(ledger.held())
    if outcome is LedgerError:
        with pytest.raises(LedgerError, match=f"job 1 .*cannot {verb.value}|without a slot"):
            apply(ledger, lease, verb)
        assert lease.phase is phase and sorted(ledger.held()) == before
    elif outcome in (IGNORED, UNTOUCHED):
        apply(ledger, lease, verb)
        assert lease.phase is phase
        if verb is Verb.TAKE:  # a new lease of the same job, claimed
            new = ledger.lease(1)
            assert new is not None and new is not lease and new.phase is Phase.CLAIMED
        else:
            assert sorted(ledger.held()) == before
    else:
        apply(ledger, lease, verb)
        assert lease.phase is outcome
    if verb is Verb.TAKE and outcome is IGNORED:
        return  # the new lease has the same (id, token): checked above
    held = {(job_id, token) for job_id, token, _ in ledger.held()}
    mine = (1, lease.job.lease_token)
    assert (mine in held) is (lease.phase in HELD)
    assert (mine in ledger.started()) is (lease.phase in (Phase.RUNNING, Phase.FINISHING))


def test_a_lease_lost_while_running_keeps_its_slot_until_its_attempt_ends() -> None:
    ledger = Ledger(concurrency=1)
    lease = in_phase(ledger, Phase.RUNNING)
    assert ledger.lost(1, lease.job.lease_token) is lease and lease.in_slot
    assert (ledger.held(), ledger.started(), ledger.running_ids()) == ([], frozenset(), [])
    assert ledger.free == 0  # its (cancelled) attempt still runs
    ledger.finish(lease, Disposition.RELEASE, None)
    assert (lease.phase, lease.in_slot, ledger.free) == (Phase.LOST, False, 1)
    with pytest.raises(LedgerError, match="without a slot"):
        ledger.finish(lease, Disposition.RELEASE, None)


def test_no_start_with_every_slot_busy() -> None:
    ledger = Ledger(concurrency=1)
    in_phase(ledger, Phase.RUNNING, job_id=1)
    waiting = in_phase(ledger, Phase.CLAIMED, job_id=2)
    assert ledger.next_ready() is None
    with pytest.raises(LedgerError, match="every slot busy"):
        ledger.start(waiting)
    assert waiting.phase is Phase.CLAIMED


# -- the bugs the shared job table had -------------------------------------------------------


@pytest.mark.parametrize("old_phase", [Phase.CLAIMED, Phase.RUNNING, Phase.FINISHING])
def test_a_reclaim_under_a_new_token_loses_the_old_lease(old_phase: Phase) -> None:
    """The stale attempt of a re-claimed job: the old lease lapsed and was swept while this
    worker held it, and this worker claimed the job again. The old lease is lost at once (a
    running attempt is handed back to cancel) before the new one can start, and late reports
    about the old token touch nothing of the new lease."""
    ledger = Ledger(concurrency=2)
    old = in_phase(ledger, old_phase)
    new_job = job(1, "w:new")
    assert ledger.take([new_job]) == [old]
    assert old.phase is Phase.LOST and old.in_slot is (old_phase is Phase.RUNNING)
    assert ledger.held() == [(1, "w:new", 30.0)]
    new = ledger.next_ready()
    assert new is not None and new.job is new_job
    ledger.start(new)
    if old.in_slot:  # the stale attempt still occupies its slot until it ends
        assert ledger.free == 0
        ledger.finish(old, Disposition.RELEASE, None)
    assert ledger.free == 1 and ledger.running_ids() == [1] and ledger.running(1) is new
    ledger.written(1, old.job.lease_token)  # the stale attempt's outcome: not held any more
    assert ledger.lost(1, old.job.lease_token) is None
    assert new.phase is Phase.RUNNING and ledger.started() == {(1, "w:new")}


def test_an_unwritten_outcome_keeps_its_lease_heartbeated() -> None:
    """An outcome waiting in the completer (say the database is away) keeps its lease: held
    and marked started until it is written, or another worker would run the job again."""
    ledger = Ledger(concurrency=1)
    lease = in_phase(ledger, Phase.RUNNING)
    ledger.finish(lease, Disposition.SUCCEED, 0.01)
    token = lease.job.lease_token
    assert ledger.free == 1 and ledger.running_ids() == []
    assert ledger.held() == [(1, token, 30.0)] and ledger.started() == {(1, token)}
    ledger.written(1, token)
    assert (ledger.held(), ledger.started()) == ([], frozenset())


def test_a_release_keeps_its_lease_until_written_and_is_not_started() -> None:
    ledger = Ledger(concurrency=1)
    for job_id in (1, 2, 3):
        in_phase(ledger, Phase.CLAIMED, job_id)
    given = ledger.give_back(1)
    assert [lease.job.id for lease in given] == [3, 2]  # the newest first; the oldest kept
    assert sorted(j for j, _, _ in ledger.held()) == [1, 2, 3] and ledger.started() == set()
    assert ledger.claimed_ahead == 1
    for lease in given:
        ledger.written(lease.job.id, lease.job.lease_token)
    assert [j for j, _, _ in ledger.held()] == [1]


async def test_a_stop_wakes_a_producer_waiting_for_a_slot() -> None:
    """Every slot busy and the producer waiting for one: ``hold`` (the worker stops) must
    wake it, or SIGTERM would wait for a job to end; no job starts after it."""
    ledger = Ledger(concurrency=1)
    in_phase(ledger, Phase.RUNNING, job_id=1)
    in_phase(ledger, Phase.CLAIMED, job_id=2)
    ledger.slot_freed.clear()
    waiting = asyncio.create_task(ledger.slot_freed.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    ledger.hold()
    await asyncio.wait_for(waiting, 5)
    running = ledger.running(1)
    assert running is not None
    ledger.finish(running, Disposition.SUCCEED, 0.01)
    assert ledger.next_ready() is None and ledger.claimed_ahead == 1


# -- what the producer asks ------------------------------------------------------------------


def test_room_is_the_free_slots_and_the_window_less_what_is_claimed_ahead() -> None:
    ledger = Ledger(concurrency=2, window=ClaimWindow(2, prefetch=3))
    assert ledger.room() == 5
    in_phase(ledger, Phase.RUNNING, job_id=1)
    assert ledger.room() == 4
    in_phase(ledger, Phase.RUNNING, job_id=2)
    assert ledger.room() == 3
    for job_id in (3, 4, 5):
        in_phase(ledger, Phase.CLAIMED, job_id)
    assert ledger.room() == 0
    lease = ledger.running(1)
    assert lease is not None
    ledger.finish(lease, Disposition.SUCCEED, 0.01)
    assert ledger.room() == 1


def test_busy_for_is_how_long_the_last_started_job_has_run_once_every_slot_is_busy() -> None:
    clock = Clock()
    ledger = Ledger(concurrency=2, clock=clock)
    in_phase(ledger, Phase.RUNNING, job_id=1)
    clock.now += 5
    assert ledger.busy_for() == 0.0  # a slot is free
    in_phase(ledger, Phase.RUNNING, job_id=2)
    clock.now += 1.5
    assert ledger.busy_for() == 1.5
    assert ledger.window.gives_back(ledger.busy_for()) and ledger.room() == 0


def test_finish_feeds_the_window_and_counts_requeues() -> None:
    ledger = Ledger(concurrency=3)
    dispositions = [Disposition.SUCCEED, Disposition.RETRY, Disposition.SNOOZE]
    leases = [in_phase(ledger, Phase.RUNNING, job_id) for job_id in (1, 2, 3)]
    for lease, disposition, duration in zip(leases, dispositions, (1.0, None, 2.0), strict=True):
        ledger.finish(lease, disposition, duration)
    assert ledger.requeues == 2
    assert ledger.mean_duration == pytest.approx(1.1)  # the cancelled one says nothing
    release = in_phase(ledger, Phase.RUNNING, job_id=4)
    ledger.finish(release, Disposition.RELEASE, None)
    assert ledger.requeues == 3


# -- the runner's and the completer's one-call paths -------------------------------------------


def test_start_next_starts_the_first_claimed_while_a_slot_is_free() -> None:
    ledger = Ledger(concurrency=2)
    leases = [in_phase(ledger, Phase.CLAIMED, job_id) for job_id in (1, 2, 3)]
    assert ledger.start_next() is leases[0] and ledger.start_next() is leases[1]
    assert ledger.start_next() is None  # every slot busy: the third waits
    assert [lease.phase for lease in leases] == [Phase.RUNNING, Phase.RUNNING, Phase.CLAIMED]
    assert (ledger.running_ids(), ledger.claimed_ahead, ledger.free) == ([1, 2], 1, 0)
    assert all(lease.in_slot for lease in leases[:2])
    ledger.finish(leases[0], Disposition.SUCCEED, 0.01)
    ledger.hold()
    assert ledger.start_next() is None and leases[2].phase is Phase.CLAIMED  # stopping
    assert Ledger(concurrency=1).start_next() is None  # nothing claimed


def test_written_all_is_written_for_each_outcome_of_a_batch() -> None:
    ledger = Ledger(concurrency=3)
    done = [in_phase(ledger, Phase.FINISHING, job_id) for job_id in (1, 2)]
    stale = Completion(3, "w:gone", Disposition.SUCCEED)  # no longer held: ignored
    ledger.written_all(
        [Completion(lease.job.id, lease.job.lease_token, Disposition.SUCCEED) for lease in done]
        + [stale]
    )
    assert [lease.phase for lease in done] == [Phase.WRITTEN, Phase.WRITTEN]
    assert ledger.held() == []
    claimed = in_phase(ledger, Phase.CLAIMED, 4)
    with pytest.raises(LedgerError, match="cannot written a lease that is claimed"):
        ledger.written_all([Completion(4, claimed.job.lease_token, Disposition.SUCCEED)])


def test_the_segments_a_beat_reads_are_those_its_jobs_were_claimed_from() -> None:
    """PostgreSQL's claims name each job's live segment; the heartbeat reads only those (and
    the long one, added by the backend). One job without a segment (SQLite's) means any."""
    ledger = Ledger(concurrency=4)
    assert ledger.segments() == frozenset()
    ledger.take(dataclasses.replace(job(n), segment=s) for n, s in ((1, 2), (2, 0), (3, 2)))
    assert ledger.segments() == frozenset({0, 2})
    ledger.take([job(4)])
    assert ledger.segments() is None
