"""Every job carries a lane (docs/design.md, "Every job carries a lane"), run on SQLite and
PostgreSQL alike: a claim takes its own lane's jobs alone, whichever claim it is, and an
outcome, a heartbeat, a reclaim, the next-run and ready probes read their lane only. A job's
lane is written at enqueue (the default: ``default``) and comes back on the claimed job."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from skiplock._backends import Backend
from skiplock._backends.params import (
    ClaimParams,
    JobHeartbeatManyParams,
    JobInsertManyParams,
    JobReclaimWorkerParams,
    QueueSetLimitsParams,
)
from skiplock._backends.workflow_params import WorkflowEnqueueParams
from skiplock._backends.workflow_plan import Node, Plan
from skiplock._job import DEFAULT_LANE, ClaimedJob, Completion, Disposition, JobState

from ..helpers import FakeClock
from .helpers import claim, new_job


def of_lane(params: ClaimParams, lane: str) -> ClaimParams:
    return dataclasses.replace(params, lane=lane)


def done(job: ClaimedJob, lane: str | None = None) -> Completion:
    """``job``'s success, in ``lane`` (None: the lane it was claimed from)."""
    return Completion(
        job.id,
        job.lease_token,
        Disposition.SUCCEED,
        segment=job.segment,
        lane=job.lane if lane is None else lane,
    )


async def test_a_job_is_enqueued_in_default_unless_given_a_lane(backend: Backend) -> None:
    plain, other = await backend.job_insert_many(
        JobInsertManyParams([new_job(), new_job(lane="b")])
    )
    (job,) = await backend.job_get_available(claim())
    assert (job.id, job.lane) == (plain, DEFAULT_LANE)
    (job,) = await backend.job_get_available(of_lane(claim(), "b"))
    assert (job.id, job.lane) == (other, "b")


async def test_each_claim_takes_its_own_lanes_jobs_alone(backend: Backend) -> None:
    """The ordinary claim, by queues or not, the keyed claim, a limited queue's and an aging
    queue's: a job of lane b is never taken by a claim of ``default``, and is by one of b."""
    await backend.queue_set_limits(QueueSetLimitsParams("capped", max_running=10))
    await backend.queue_set_limits(QueueSetLimitsParams("aged", aging_s=60.0))
    jobs = [
        new_job("plain", lane="b"),
        new_job("keyed", lane="b", concurrency_key="k"),
        new_job("capped", lane="b", queue="capped"),
        new_job("aged", lane="b", queue="aged"),
    ]
    ids = await backend.job_insert_many(JobInsertManyParams(jobs))
    claims = [
        (backend.job_get_available, claim()),
        (backend.job_get_available, claim(queues=("default",))),
        (backend.job_get_available_keyed, claim()),
        (backend.job_get_available_limited, claim(queues=("capped",))),
        (backend.job_get_available_limited, claim(queues=("aged",))),
    ]
    for operation, params in claims:
        assert await operation(params) == [], params
    taken = []
    for operation, params in claims[1:]:
        taken += await operation(of_lane(params, "b"))
    assert sorted(j.id for j in taken) == sorted(ids)
    assert {j.lane for j in taken} == {"b"}


async def test_an_outcome_is_written_in_its_lane_and_a_batch_of_two_lanes_writes_both(
    backend: Backend,
) -> None:
    ids = await backend.job_insert_many(
        JobInsertManyParams([new_job(), new_job(lane="b"), new_job(lane="b")])
    )
    mine = await backend.job_get_available(claim())
    theirs = await backend.job_get_available(of_lane(claim(), "b"))
    assert len(mine) == 1 and len(theirs) == 2
    # an outcome that names another lane than its job's finds no row there
    assert await backend.job_set_state_if_running_many([done(theirs[0], DEFAULT_LANE)]) == []
    assert (await backend.job_get(theirs[0].id)).state is JobState.RUNNING
    batch = [done(mine[0]), done(theirs[0]), done(theirs[1])]
    assert sorted(await backend.job_set_state_if_running_many(batch)) == sorted(ids)
    for job_id in ids:
        assert (await backend.job_get(job_id)).state is JobState.SUCCEEDED


async def test_a_heartbeat_is_written_in_each_jobs_lane(backend: Backend, clock: FakeClock) -> None:
    await backend.job_insert_many(JobInsertManyParams([new_job(), new_job(lane="b")]))
    (mine,) = await backend.job_get_available(claim())
    (theirs,) = await backend.job_get_available(of_lane(claim(), "b"))
    held = [(mine.id, mine.lease_token), (theirs.id, theirs.lease_token)]
    clock.advance(50)
    # told nothing of lanes, the beat looks in default alone: b's job is not held there
    kept = await backend.job_heartbeat_many(JobHeartbeatManyParams(held, 60.0, 5.0))
    assert kept == [(mine.id, mine.lease_token)]
    beat = JobHeartbeatManyParams(held, 60.0, 5.0, lanes={theirs.id: "b"})
    assert sorted(await backend.job_heartbeat_many(beat)) == sorted(held)
    record = await backend.job_get(theirs.id)
    assert record.lease_expires_at == clock.now + timedelta(seconds=65)


async def test_the_reclaim_takes_back_its_own_lanes_leases(
    backend: Backend, clock: FakeClock
) -> None:
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job(lane="b")]))
    await backend.job_get_available(of_lane(claim(), "b"))
    clock.advance(66)
    assert await backend.job_reclaim_expired() == []
    assert await backend.job_reclaim_expired(lane="b") == [job_id]
    assert (await backend.job_get(job_id)).state is JobState.PENDING


async def test_a_workers_release_frees_its_leases_in_the_lane_named(backend: Backend) -> None:
    """The supervisor's release of a gone worker's leases (token ``w1:...``), one lane a call."""
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job(lane="b")]))
    await backend.job_get_available(of_lane(claim(token="w1:1"), "b"))
    assert await backend.job_reclaim_worker(JobReclaimWorkerParams("w1")) == []
    assert await backend.job_reclaim_worker(JobReclaimWorkerParams("w1", lane="b")) == [job_id]
    assert (await backend.job_get(job_id)).state is JobState.PENDING


async def test_next_run_and_ready_look_at_their_lane_only(
    backend: Backend, clock: FakeClock
) -> None:
    await backend.job_insert_many(JobInsertManyParams([new_job(lane="b", run_after_s=30.0)]))
    assert await backend.job_next_run_at() is None
    due = await backend.job_next_run_at(lane="b")
    assert due is not None and 29.0 <= due <= 30.0
    clock.advance(31)
    assert not await backend.job_ready_exists(None)
    assert await backend.job_ready_exists(None, lane="b")
    await backend.job_insert_many(JobInsertManyParams([new_job(lane="b", concurrency_key="k")]))
    assert not await backend.job_ready_exists(("default",))
    assert await backend.job_ready_exists(("default",), lane="b")


async def test_a_workflow_in_another_lane_is_released_in_it(backend: Backend) -> None:
    """A workflow lives in one lane: its parent's success, written in lane b, releases the
    child (the completion's own release names the lane), which a claim of b then takes."""
    plan = Plan((Node(new_job("p", lane="b")), Node(new_job("c", lane="b"), parents=(0,))))
    parent, child = await backend.workflow_enqueue(WorkflowEnqueueParams(plan, None))
    assert (await backend.job_get(child)).state is JobState.WAITING
    (job,) = await backend.job_get_available(of_lane(claim(), "b"))
    assert await backend.job_set_state_if_running_many([done(job)]) == [parent]
    assert (await backend.job_get(child)).state is JobState.PENDING
    assert await backend.job_get_available(claim()) == []
    assert [j.id for j in await backend.job_get_available(of_lane(claim(), "b"))] == [child]
