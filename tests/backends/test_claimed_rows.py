"""A claim's rows become ``ClaimedJob``s with every field the row holds, on both backends and
through both claims (the ordinary one and a limited queue's). On PostgreSQL the jobs are
built from each record by position (postgres_ops.claimed_in_order), which is only right
while the claim's RETURNING lists ClaimedJob's fields in their order: these tests fail when
it does not."""

from __future__ import annotations

import dataclasses

import pytest

from skiplock._backends import Backend
from skiplock._backends.params import JobInsertManyParams, QueueSetLimitsParams
from skiplock._backends.postgres import rows as postgres_ops
from skiplock._job import ClaimedJob

from .helpers import claim, new_job


def _expected(job: ClaimedJob) -> dict[str, object]:
    return {f.name: getattr(job, f.name) for f in dataclasses.fields(ClaimedJob)}


async def _claimed_rows_hold_the_row(backend: Backend, queue: str) -> None:
    jobs = [
        new_job("a", queue=queue, priority=5, timeout=12.5, correlation_id="c-1"),
        new_job("b", queue=queue, args_json="[2, 3]", kwargs_json="{}"),
    ]
    ids = await backend.job_insert_many(JobInsertManyParams(jobs))
    params = claim(limit=5, queues=(queue,))
    if queue == "default":
        claimed = await backend.job_get_available(params)
    else:
        claimed = await backend.job_get_available_limited(params)
    assert [c.id for c in claimed] == ids  # priority 5 first, then by id
    first, second = claimed
    assert (first.task, first.queue, first.priority, first.timeout) == ("a", queue, 5, 12.5)
    assert first.correlation_id == "c-1" and second.correlation_id is None
    assert (second.args_json, second.kwargs_json) == ("[2, 3]", "{}")
    for job in claimed:
        record = await backend.job_get(job.id)
        assert job.attempt == record.attempt == 1 and job.max_attempts == 3
        assert job.lease_token == "tok" and job.payload_version == 1
        assert job.created_at == record.created_at
        assert job.lease_expires_at == record.lease_expires_at
        assert job.lease_s == (12.5 if job.task == "a" else 60.0) + 5.0  # timeout or default
        assert job.trace_context is None


async def test_a_claim_reads_every_field_of_its_rows(backend: Backend) -> None:
    await _claimed_rows_hold_the_row(backend, "default")


async def test_a_limited_claim_reads_every_field_of_its_rows(backend: Backend) -> None:
    await backend.queue_set_limits(QueueSetLimitsParams("capped", max_running=10))
    await _claimed_rows_hold_the_row(backend, "capped")


async def test_postgres_claims_build_jobs_by_position(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither claim falls back to reading its rows by name (the slower path, kept for a
    statement whose columns differ)."""
    if not backend.url.startswith("postgresql"):
        pytest.skip("SQLite's rows are read by name")

    def by_name(*_: object) -> list[ClaimedJob]:
        raise AssertionError("a claim's columns are not ClaimedJob's fields in order")

    monkeypatch.setattr(postgres_ops, "claimed_jobs", by_name)
    await _claimed_rows_hold_the_row(backend, "default")
    await backend.queue_set_limits(QueueSetLimitsParams("capped", max_running=10))
    await _claimed_rows_hold_the_row(backend, "capped")
