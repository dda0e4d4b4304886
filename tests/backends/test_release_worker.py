"""``App.release_worker``: a dead worker's leases back at once (issue 20, defect 7), on both
databases. Only that worker's tokens are touched, the reclaim rule decides where each row goes,
and the dead worker's writes are still fenced off."""

from __future__ import annotations

import pytest

import skiplock
from skiplock import JobState
from skiplock._backends import Backend
from skiplock._backends.params import JobInsertManyParams
from skiplock._job import Completion, Disposition

from .helpers import claim, new_job


async def test_a_dead_workers_leases_are_released_and_no_one_elses(
    clocked_app: skiplock.App, backend: Backend
) -> None:
    await backend.job_insert_many(JobInsertManyParams([new_job() for _ in range(4)]))
    dead = await backend.job_get_available(claim(2, token="host:1:abc:1"))
    # a worker whose id starts like the dead one's ("host:1:ab") must keep its lease
    alive = await backend.job_get_available(claim(2, token="host:1:ab:1"))
    released = await clocked_app.release_worker("host:1:abc")
    assert sorted(released) == sorted(job.id for job in dead)
    for job in dead:
        row = await clocked_app.get_job(job.id)
        assert row.state is JobState.PENDING and row.lease_expires_at is None
        assert row.attempt == 1  # the reclaim rule: the attempt stays spent
        assert "released by its supervisor" in row.errors[-1]["message"]
    for job in alive:
        assert (await clocked_app.get_job(job.id)).state is JobState.RUNNING
    # fencing unchanged: the dead worker's outcome under its old token writes nothing
    late = [Completion(job.id, job.lease_token, Disposition.SUCCEED) for job in dead]
    assert await backend.job_set_state_if_running_many(late) == []
    assert await clocked_app.release_worker("host:1:abc") == []


async def test_a_released_job_with_its_attempts_spent_is_dead(
    clocked_app: skiplock.App, backend: Backend
) -> None:
    await backend.job_insert_many(JobInsertManyParams([new_job(max_attempts=1)]))
    (job,) = await backend.job_get_available(claim(1, token="w:x:1"))
    assert await clocked_app.release_worker("w:x") == [job.id]
    row = await clocked_app.get_job(job.id)
    assert row.state is JobState.DEAD and row.finished_at is not None


async def test_the_worker_id_is_checked(clocked_app: skiplock.App) -> None:
    with pytest.raises(skiplock.ConfigurationError, match="worker_id"):
        await clocked_app.release_worker("  ")
