"""One conformance suite for the backend protocol, run on SQLite and PostgreSQL alike."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import timedelta

import pytest

import skiplock
from skiplock._backends import Backend, open_backend
from skiplock._backends.params import (
    JobActionParams,
    JobHeartbeatManyParams,
    JobInsertManyParams,
    QueueSetLimitsParams,
    QueueSetPausedParams,
    TaskPauseParams,
)
from skiplock._backends.protocol import MAX_ERRORS_KEPT
from skiplock._job import Completion, Disposition, JobState
from skiplock._transitions import transition
from skiplock.errors import JobNotFound

from ..helpers import FakeClock
from .helpers import claim, new_job


async def test_schema_is_current_after_migrate_and_migrate_is_idempotent(
    backend: Backend,
) -> None:
    current, latest = await backend.schema_version()
    assert current == latest >= 1
    assert await backend.migrate() == []


async def test_schema_version_is_zero_before_migrate(db_url: str) -> None:
    app = skiplock.App(db_url)
    if db_url.startswith("sqlite"):  # no file: only a migration may create one
        with pytest.raises(skiplock.SchemaError, match=r"no SQLite database at .*migrate"):
            await app.backend()
        sqlite3.connect(db_url.removeprefix("sqlite:///")).close()  # an empty database
    try:
        assert (await (await app.backend()).schema_version())[0] == 0
        with pytest.raises(skiplock.SchemaError, match="skiplock migrate"):
            await app.check_schema()
    finally:
        await app.close()


async def test_insert_many_returns_ids_in_order_and_rows_read_back(backend: Backend) -> None:
    ids = await backend.job_insert_many(JobInsertManyParams([new_job(f"t{i}") for i in range(5)]))
    assert ids == sorted(ids) and len(set(ids)) == 5
    for i, job_id in enumerate(ids):
        record = await backend.job_get(job_id)
        assert record.task == f"t{i}"
        assert record.state is JobState.PENDING
        assert record.args == [1] and record.kwargs == {"k": "v"}
        assert record.attempt == 0 and record.errors == []


async def test_job_get_unknown_id(backend: Backend) -> None:
    with pytest.raises(JobNotFound):
        await backend.job_get(987654)


async def test_claim_marks_running_counts_attempt_and_sets_lease(
    backend: Backend, clock: FakeClock
) -> None:
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job(timeout=10.0)]))
    (claimed,) = await backend.job_get_available(claim())
    assert (claimed.id, claimed.attempt, claimed.lease_token) == (job_id, 1, "tok")
    assert claimed.lease_expires_at == clock.now + timedelta(seconds=15)
    record = await backend.job_get(job_id)
    assert record.state is JobState.RUNNING and record.locked_by == "w1"
    assert await backend.job_get_available(claim()) == []


async def test_claim_order_is_priority_then_run_at_then_id(
    backend: Backend, clock: FakeClock
) -> None:
    low = await backend.job_insert_many(JobInsertManyParams([new_job("low", priority=0)]))
    high = await backend.job_insert_many(JobInsertManyParams([new_job("high", priority=5)]))
    older = await backend.job_insert_many(
        JobInsertManyParams([new_job("older", run_at=clock.now - timedelta(hours=1))])
    )
    claimed = await backend.job_get_available(claim(limit=2))
    assert {c.id for c in claimed} == {high[0], older[0]}
    (last,) = await backend.job_get_available(claim())
    assert last.id == low[0]


async def test_claim_respects_limit_queues_and_run_at(backend: Backend, clock: FakeClock) -> None:
    await backend.job_insert_many(JobInsertManyParams([new_job(queue="a") for _ in range(3)]))
    await backend.job_insert_many(JobInsertManyParams([new_job(queue="b")]))
    await backend.job_insert_many(JobInsertManyParams([new_job(queue="a", run_after_s=30.0)]))
    assert len(await backend.job_get_available(claim(limit=2, queues=("a",)))) == 2
    assert [c.queue for c in await backend.job_get_available(claim(queues=("b",)))] == ["b"]
    assert len(await backend.job_get_available(claim(queues=("a",)))) == 1
    assert await backend.job_get_available(claim()) == []
    clock.advance(31)
    assert len(await backend.job_get_available(claim())) == 1


async def test_ready_exists_answers_what_the_ordinary_claim_would_take(
    backend: Backend, clock: FakeClock
) -> None:
    """The probe a burst worker makes before it ends: a due pending job of a served queue,
    none of a paused queue or task, a limited queue, a later run_at or a running job."""
    ready = backend.job_ready_exists
    assert not await ready(None)
    await backend.job_insert_many(JobInsertManyParams([new_job(queue="later", run_after_s=30.0)]))
    await backend.job_insert_many(JobInsertManyParams([new_job(queue="held")]))
    await backend.queue_set_paused(QueueSetPausedParams("held", True))
    await backend.job_insert_many(JobInsertManyParams([new_job(queue="capped")]))
    await backend.queue_set_limits(QueueSetLimitsParams("capped", max_running=5))
    await backend.job_insert_many(JobInsertManyParams([new_job("stopped", queue="tasks")]))
    await backend.task_pause(TaskPauseParams("stopped", "test"))
    assert not await ready(None)
    await backend.job_insert_many(JobInsertManyParams([new_job(queue="mine")]))
    assert await ready(None) and await ready(("other", "mine"))
    assert not await ready(("later", "held", "capped", "tasks"))
    clock.advance(31)
    assert await ready(("later",))
    await backend.job_get_available(claim(queues=("mine", "later")))
    assert not await ready(("mine", "later"))


async def test_a_claim_over_several_queues_takes_the_best_jobs_of_all(backend: Backend) -> None:
    """Priority, then age, across the listed queues; others untouched; a queue named twice
    counts once."""
    a_low, a_high = await backend.job_insert_many(
        JobInsertManyParams(
            [new_job("a_low", queue="a", priority=1), new_job("a_high", queue="a", priority=9)]
        )
    )
    b_mid, b_top = await backend.job_insert_many(
        JobInsertManyParams(
            [new_job("b_mid", queue="b", priority=5), new_job("b_top", queue="b", priority=7)]
        )
    )
    await backend.job_insert_many(JobInsertManyParams([new_job("c_best", queue="c", priority=99)]))
    taken = await backend.job_get_available(claim(limit=3, queues=("a", "b", "a")))
    assert [j.id for j in taken] == [a_high, b_top, b_mid]
    taken = await backend.job_get_available(claim(limit=3, queues=("b", "a")))
    assert [j.id for j in taken] == [a_low]
    assert [j.task for j in await backend.job_get_available(claim())] == ["c_best"]


async def test_concurrent_claims_never_share_a_job(
    backend: Backend, db_url: str, clock: FakeClock
) -> None:
    """Four backends, each with its own connections (SQLite: its own connection on its own
    thread), claim in rounds, all four at once in each, until the table is empty: their
    transactions really contend, so a claim that did not lock what it picked would hand some
    job out twice. (Rounds, because SQLite's write lock is not fair: left to race, one
    claimer may take every job.)"""
    await backend.job_insert_many(JobInsertManyParams([new_job() for _ in range(400)]))
    claimers = [open_backend(db_url, clock=clock) for _ in range(4)]
    for other in claimers:
        await other.open()
    rounds = asyncio.Barrier(len(claimers))

    async def drain(other: Backend, n: int) -> list[int]:
        ids: list[int] = []
        for _ in range(400 // (3 * len(claimers)) + 1):
            ids += [c.id for c in await other.job_get_available(claim(limit=3, token=f"t{n}"))]
            await rounds.wait()
        return ids

    try:
        taken = await asyncio.gather(*(drain(other, n) for n, other in enumerate(claimers)))
    finally:
        for other in claimers:
            await other.close()
    ids = [job_id for batch in taken for job_id in batch]
    assert len(ids) == len(set(ids)) == 400
    assert all(taken), "every claimer took part"


async def test_completions_apply_only_under_the_current_lease(backend: Backend) -> None:
    ids = await backend.job_insert_many(JobInsertManyParams([new_job() for _ in range(3)]))
    claimed = await backend.job_get_available(claim())
    stale = Completion(ids[0], "someone-else", Disposition.SUCCEED)
    good = [Completion(c.id, c.lease_token, Disposition.SUCCEED) for c in claimed[1:]]
    applied = await backend.job_set_state_if_running_many([stale, *good])
    assert sorted(applied) == sorted(ids[1:])
    assert (await backend.job_get(ids[0])).state is JobState.RUNNING
    assert (await backend.job_get(ids[1])).state is JobState.SUCCEEDED
    # a second completion of a finished job changes nothing
    assert await backend.job_set_state_if_running_many(good) == []


@pytest.mark.parametrize(
    ("disposition", "state", "attempt_after", "finished"),
    [
        (Disposition.SUCCEED, JobState.SUCCEEDED, 1, True),
        (Disposition.CANCEL, JobState.CANCELLED, 1, True),
        (Disposition.DEAD, JobState.DEAD, 1, True),
        (Disposition.RETRY, JobState.PENDING, 1, False),
        (Disposition.SNOOZE, JobState.PENDING, 0, False),
        (Disposition.RELEASE, JobState.PENDING, 0, False),
    ],
)
async def test_each_disposition(
    backend: Backend,
    clock: FakeClock,
    disposition: Disposition,
    state: JobState,
    attempt_after: int,
    finished: bool,
) -> None:
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job()]))
    (c,) = await backend.job_get_available(claim())
    enqueued_at = clock.now
    clock.advance(3)  # the attempt ran a while: a release must not date the job from now
    error = {"attempt": 1, "message": "boom", "traceback": "tb", "at": "x"}
    await backend.job_set_state_if_running_many(
        [Completion(job_id, c.lease_token, disposition, 12.5, error)]
    )
    record = await backend.job_get(job_id)
    assert record.state is state
    assert record.attempt == attempt_after
    assert (record.finished_at == clock.now) if finished else record.finished_at is None
    assert record.lease_expires_at is None
    if disposition is Disposition.RELEASE:
        assert record.run_at == enqueued_at  # given back: its place among the ready kept
    elif not finished:
        assert record.run_at == clock.now + timedelta(seconds=12.5)
    assert record.errors[-1]["message"] == "boom"


async def test_one_batch_of_every_disposition_writes_each_row_its_own(
    backend: Backend, clock: FakeClock
) -> None:
    """Each column of a mixed batch reaches its own row: PostgreSQL sends a column every row
    leaves at its default as one NULL, so a batch where some rows differ must not."""
    dispositions = list(Disposition)
    ids = await backend.job_insert_many(
        JobInsertManyParams([new_job() for _ in range(len(dispositions) + 1)])
    )
    claimed = {c.id: c for c in await backend.job_get_available(claim(limit=len(ids)))}
    enqueued_at = clock.now
    clock.advance(3)
    error = {"attempt": 1, "message": "boom", "traceback": None, "at": "x"}
    batch = [
        Completion(job_id, claimed[job_id].lease_token, d, 4.0 + n, error if n % 2 else None)
        for n, (job_id, d) in enumerate(zip(ids, dispositions, strict=False))
    ]
    batch.append(
        Completion(
            ids[-1], claimed[ids[-1]].lease_token, Disposition.SUCCEED, result_json='{"r": 1}'
        )
    )
    batch[0].result_json = "[7]"
    assert sorted(await backend.job_set_state_if_running_many(batch)) == sorted(ids)
    for completion in batch:
        record = await backend.job_get(completion.job_id)
        rule = transition(completion.disposition)
        assert record.state is rule.state, completion
        assert record.attempt == 1 + rule.attempt_delta, completion
        assert (record.finished_at == clock.now) is rule.finished, completion
        if rule.run_after_s is None and not rule.finished:
            assert record.run_at == enqueued_at, completion  # a release keeps its place
        elif not rule.finished:
            assert record.run_at == clock.now + timedelta(seconds=completion.delay_s)
        assert [e["message"] for e in record.errors] == (["boom"] if completion.error else []), (
            completion
        )
    assert (await backend.job_get(ids[0])).result == [7]
    assert (await backend.job_get(ids[-1])).result == {"r": 1}
    assert (await backend.job_get(ids[1])).result is None


async def test_errors_are_bounded_to_the_last_ones(backend: Backend) -> None:
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job(max_attempts=100)]))
    for n in range(MAX_ERRORS_KEPT + 5):
        (c,) = await backend.job_get_available(claim(token=f"t{n}"))
        error = {"attempt": c.attempt, "message": f"e{n}", "traceback": None, "at": "x"}
        await backend.job_set_state_if_running_many(
            [Completion(job_id, c.lease_token, Disposition.RETRY, 0.0, error)]
        )
    errors = (await backend.job_get(job_id)).errors
    assert len(errors) == MAX_ERRORS_KEPT
    assert [e["message"] for e in errors][-1] == f"e{MAX_ERRORS_KEPT + 4}"
    assert errors[0]["message"] == "e5"


async def test_count_by_state(backend: Backend) -> None:
    await backend.job_insert_many(
        JobInsertManyParams([new_job(queue="a"), new_job(queue="a"), new_job(queue="b")])
    )
    await backend.job_get_available(claim(limit=1, queues=("b",)))
    counts = await backend.job_count_by_state()
    assert counts == {
        "pending": 2,
        "running": 0,
        "claimed": 1,  # claimed, not reported started by a heartbeat
        "succeeded": 0,
        "cancelled": 0,
        "dead": 0,
        "waiting": 0,
    }
    assert (await backend.job_count_by_state("a"))["pending"] == 2


async def test_retry_requeues_a_dead_job_with_attempts_reset(backend: Backend) -> None:
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job()]))
    (c,) = await backend.job_get_available(claim())
    assert not await backend.job_retry(
        JobActionParams(job_id)
    )  # running: not for a person to requeue
    await backend.job_set_state_if_running_many(
        [Completion(job_id, c.lease_token, Disposition.DEAD)]
    )
    assert await backend.job_retry(JobActionParams(job_id))
    record = await backend.job_get(job_id)
    assert (record.state, record.attempt, record.finished_at) == (JobState.PENDING, 0, None)


async def test_heartbeat_extends_only_held_leases(backend: Backend, clock: FakeClock) -> None:
    ids = await backend.job_insert_many(JobInsertManyParams([new_job(), new_job()]))
    claimed = await backend.job_get_available(claim())
    clock.advance(50)
    held = [(claimed[0].id, claimed[0].lease_token), (claimed[1].id, "stale")]
    assert await backend.job_heartbeat_many(JobHeartbeatManyParams(held, 60.0, 5.0)) == [
        (claimed[0].id, claimed[0].lease_token)
    ]
    record = await backend.job_get(claimed[0].id)
    assert record.lease_expires_at == clock.now + timedelta(seconds=65)
    assert sorted(ids) == sorted(c.id for c in claimed)


async def test_heartbeat_tells_a_stale_attempt_from_a_new_claim_of_the_same_job(
    backend: Backend, clock: FakeClock
) -> None:
    """A worker that re-claims its own lapsed job holds the job under two tokens: the answer
    names the pair still held, so the old attempt is seen lost though its id is renewed."""
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job()]))
    (old,) = await backend.job_get_available(claim(token="old"))
    clock.advance(66)
    assert await backend.job_reclaim_expired() == [job_id]
    (new,) = await backend.job_get_available(claim(token="new"))
    held = [(job_id, old.lease_token), (job_id, new.lease_token)]
    kept = await backend.job_heartbeat_many(JobHeartbeatManyParams(held, 60.0, 5.0))
    assert kept == [(job_id, "new")]


async def test_reclaim_returns_expired_leases_to_pending_or_dead(
    backend: Backend, clock: FakeClock
) -> None:
    (alive, spent) = await backend.job_insert_many(
        JobInsertManyParams([new_job(max_attempts=3), new_job(max_attempts=1)])
    )
    await backend.job_get_available(claim())
    assert await backend.job_reclaim_expired() == []
    clock.advance(66)
    assert sorted(await backend.job_reclaim_expired()) == sorted([alive, spent])
    assert (await backend.job_get(alive)).state is JobState.PENDING
    dead = await backend.job_get(spent)
    assert dead.state is JobState.DEAD
    assert "lease expired" in dead.errors[-1]["message"]
    assert await backend.job_reclaim_expired() == []


async def test_concurrent_reclaimers_act_on_each_row_once(
    backend: Backend, clock: FakeClock
) -> None:
    await backend.job_insert_many(JobInsertManyParams([new_job() for _ in range(50)]))
    await backend.job_get_available(claim(limit=50))
    clock.advance(120)
    passes = await asyncio.gather(*(backend.job_reclaim_expired() for _ in range(5)))
    reclaimed = [job_id for ids in passes for job_id in ids]
    assert len(reclaimed) == len(set(reclaimed)) == 50


async def test_warm_up_touches_no_row(backend: Backend) -> None:
    ids = await backend.job_insert_many(JobInsertManyParams([new_job() for _ in range(3)]))
    await backend.warm_up()
    await backend.warm_up()  # idempotent: a worker restarting on the same backend
    assert [(await backend.job_get(i)).state for i in ids] == [JobState.PENDING] * 3
    assert len(await backend.job_get_available(claim(limit=10))) == 3


async def test_jobs_claimed_ahead_count_apart_from_started_ones(backend: Backend) -> None:
    """A claim leases jobs a worker may only hold (claimed ahead, prefetch); its heartbeat
    marks the ones it started. Counts, queue listings and the job row tell them apart."""
    await backend.job_insert_many(JobInsertManyParams([new_job(), new_job(), new_job()]))
    first, second, third = await backend.job_get_available(claim(limit=3))
    counts = await backend.job_count_by_state()
    assert (counts["running"], counts["claimed"]) == (0, 3)
    held = [(j.id, j.lease_token) for j in (first, second, third)]
    started = frozenset(held[:2])
    kept = await backend.job_heartbeat_many(JobHeartbeatManyParams(held, 60.0, 5.0, started))
    assert sorted(kept) == sorted(held)
    counts = await backend.job_count_by_state()
    assert (counts["running"], counts["claimed"]) == (2, 1)
    (queue,) = await backend.queue_list()
    assert (queue.running, queue.claimed) == (2, 1)
    started_at = (await backend.job_get(first.id)).started_at
    assert started_at is not None and (await backend.job_get(third.id)).started_at is None
    await backend.job_heartbeat_many(JobHeartbeatManyParams(held, 60.0, 5.0, frozenset(held)))
    assert (await backend.job_get(first.id)).started_at == started_at  # the first start kept
