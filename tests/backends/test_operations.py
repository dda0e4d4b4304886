"""Conformance for the operations a person uses: cancel, list, requeue, discard, prune."""

from __future__ import annotations

from datetime import timedelta

import pytest

import skiplock
from skiplock._backends import Backend
from skiplock._backends.params import (
    DeadActionParams,
    JobActionParams,
    JobFindParams,
    JobHeartbeatManyParams,
    JobInsertManyParams,
    JobListParams,
    JobPruneParams,
)
from skiplock._job import Completion, Disposition, JobFilter, JobRecord, JobState
from skiplock.errors import JobNotFound

from ..helpers import FakeClock
from .helpers import bury_many, claim, new_job


async def cancel(backend: Backend, job_id: int, who: str) -> JobState:
    return await backend.job_cancel(JobActionParams(job_id, who))


async def listed(backend: Backend, state: JobState | None, where: JobFilter) -> list[JobRecord]:
    return await backend.job_list(JobListParams(where, state))


async def requeue(backend: Backend, where: JobFilter, who: str) -> list[int]:
    return await backend.job_requeue_dead(DeadActionParams(where, who))


async def discard(backend: Backend, where: JobFilter, who: str) -> list[int]:
    return await backend.job_discard_dead(DeadActionParams(where, who))


async def bury(backend: Backend, task: str, error: str, queue: str = "default") -> int:
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job(task, queue=queue)]))
    (c,) = await backend.job_get_available(claim(limit=1, token=f"bury{job_id}"))
    assert c.id == job_id
    err = {"attempt": 1, "message": error, "traceback": None, "at": "x"}
    await backend.job_set_state_if_running_many(
        [Completion(job_id, c.lease_token, Disposition.DEAD, 0.0, err)]
    )
    return job_id


async def test_a_dead_action_acts_on_at_most_its_limit_the_oldest_first(
    backend: Backend,
) -> None:
    """150 dead: requeue with limit 10 requeues 10, discard with limit 5 discards 5, each the
    oldest still matching, and the oldest-first list with the same filter shows them."""
    ids = await bury_many(backend, "mail", [f"SMTP timeout {n}" for n in range(150)])
    await bury(backend, "sms", "SMTP timeout")  # another task: the filter keeps it out
    where = JobFilter(task="mail", error="smtp", limit=10)
    preview = await backend.job_list(JobListParams(where, JobState.DEAD, oldest_first=True))
    assert [r.id for r in preview] == ids[:10]
    assert await requeue(backend, where, "ops") == ids[:10]
    assert await backend.job_count(JobListParams(where, JobState.DEAD)) == 140
    assert await discard(backend, JobFilter(task="mail", limit=5), "ops") == ids[10:15]
    assert await backend.job_count(JobListParams(JobFilter(task="mail"), JobState.DEAD)) == 135
    page = JobListParams(JobFilter(task="mail", limit=3), JobState.DEAD, ids[20], True)
    assert [r.id for r in await backend.job_list(page)] == ids[21:24]  # pages forward


async def test_last_error_matches_a_dead_letter_group_exactly(backend: Backend) -> None:
    """Groups "boom 1" (2 jobs), "boom 10", "boom 11", "boom 12": the group "boom 1" is two
    jobs, not the five whose message contains it."""
    messages = ["boom 1", "boom 10", "boom 1", "boom 11", "boom 12"]
    ids = await bury_many(backend, "t", [f"RuntimeError: {m}" for m in messages])
    groups = {g.error: g.count for g in await backend.job_dead_groups(10)}
    assert groups["RuntimeError: boom 1"] == 2
    group = JobFilter(task="t", last_error="RuntimeError: boom 1")
    assert await backend.job_count(JobListParams(group, JobState.DEAD)) == 2
    assert await requeue(backend, group, "ops") == [ids[0], ids[2]]
    rest = await backend.job_count(JobListParams(JobFilter(task="t"), JobState.DEAD))
    assert rest == 3
    assert await discard(backend, JobFilter(last_error="RuntimeError: boom"), "ops") == []


async def test_queue_counts_come_from_live_rows_only(clocked_app: skiplock.App) -> None:
    """``queues()`` and ``queue_info()``: pending, claimed ahead and running per queue, the
    settings, and no queue for finished rows alone; ``schema_version()`` for probes."""
    backend = await clocked_app.backend()
    await bury_many(backend, "t", ["gone"], queue="history")  # finished rows only
    await clocked_app.set_queue_limits("idle", max_running=2, create=True)  # settings only
    await backend.job_insert_many(
        JobInsertManyParams([new_job(queue="q1") for _ in range(3)] + [new_job(queue="q2")])
    )
    a, _ = await backend.job_get_available(claim(2, ("q1",), "w"))
    await backend.job_heartbeat_many(
        JobHeartbeatManyParams([(a.id, "w")], 60.0, 5.0, frozenset({(a.id, "w")}))
    )
    listed = {q.name: (q.pending, q.claimed, q.running) for q in await clocked_app.queues()}
    assert listed == {"idle": (0, 0, 0), "q1": (1, 1, 1), "q2": (1, 0, 0)}
    q1 = await clocked_app.queue_info("q1")
    assert (q1.name, q1.pending, q1.claimed, q1.running, q1.paused) == ("q1", 1, 1, 1, False)
    idle = await clocked_app.queue_info("idle")
    assert (idle.max_running, idle.pending, idle.running) == (2, 0, 0)
    assert await clocked_app.queue_info("nobody") == skiplock.QueueInfo(
        "nobody", None, None, None, False, 0, 0, 0
    )
    version = await clocked_app.schema_version()
    assert version == (version.latest, version.latest) and version.latest >= 8


async def test_cancel_pending_running_and_finished(backend: Backend) -> None:
    pending, running = await backend.job_insert_many(
        JobInsertManyParams([new_job(), new_job(priority=5)])
    )
    (c,) = await backend.job_get_available(claim(limit=1))
    assert c.id == running
    assert await cancel(backend, pending, "ops@host") is JobState.CANCELLED
    assert await backend.job_get_available(claim()) == []  # a cancelled job never runs
    assert await cancel(backend, running, "ops@host") is JobState.RUNNING
    assert await backend.job_cancel_requested([running, pending]) == [running]
    record = await backend.job_get(pending)
    assert record.audit[-1]["who"] == "ops@host" and record.audit[-1]["what"] == "cancel"
    assert await cancel(backend, pending, "again") is JobState.CANCELLED  # left alone
    assert len((await backend.job_get(pending)).audit) == 1
    with pytest.raises(JobNotFound):
        await cancel(backend, 999_999, "ops")


async def test_list_filters(backend: Backend, clock: FakeClock) -> None:
    a = await bury(backend, "mail", "SMTP timeout")
    b = await bury(backend, "mail", "bad address", queue="q2")
    c = await bury(backend, "sms", "SMTP timeout")
    await backend.job_insert_many(JobInsertManyParams([new_job("mail")]))
    dead = await listed(backend, JobState.DEAD, JobFilter())
    assert [r.id for r in dead] == [c, b, a]
    assert [r.id for r in await listed(backend, JobState.DEAD, JobFilter(task="mail"))] == [b, a]
    assert [r.id for r in await listed(backend, None, JobFilter(queue="q2"))] == [b]
    by_error = await listed(backend, JobState.DEAD, JobFilter(error="SMTP"))
    assert [r.id for r in by_error] == [c, a]
    assert [r.id for r in await listed(backend, JobState.DEAD, JobFilter(ids=(a, c)))] == [c, a]
    assert await listed(backend, JobState.DEAD, JobFilter(since=clock.now + timedelta(1))) == []
    assert len(await listed(backend, JobState.DEAD, JobFilter(until=clock.now + timedelta(1))))
    assert len(await listed(backend, None, JobFilter(limit=2))) == 2


ERROR_TEXTS = [
    "JobTimeout: timed out after 30 s",
    "ValueError: Ünïcode name",
    'KeyError: "user"',
    "OSError: C:\\temp\\x missing",
    "ValueError: 100% of a_b",
    "ValueError: 100 of ab",
]


@pytest.mark.parametrize(
    ("needle", "matches"),
    [
        ("timeout", [0]),  # case: the type name says JobTimeout
        ("TIMED OUT", [0]),
        ("ünïcode", [1]),  # non-ASCII, another case
        ("ÜNÏCODE", [1]),
        ('"user"', [2]),  # a quote, which the stored JSON escapes
        ("\\temp\\", [3]),  # a backslash, likewise
        ("100%", [4]),  # % and _ are literal, never wildcards
        ("a_b", [4]),
        ("traceback", []),  # the message only, not the JSON around it
    ],
)
async def test_error_filter_matches_decoded_messages_case_insensitively(
    backend: Backend, needle: str, matches: list[int]
) -> None:
    ids = [await bury(backend, "t", text) for text in ERROR_TEXTS]
    expected = sorted(ids[i] for i in matches)
    where = JobFilter(error=needle)
    assert sorted(r.id for r in await listed(backend, JobState.DEAD, where)) == expected
    assert await discard(backend, where, "ops") == expected


async def test_requeue_and_discard_dead_by_filter(backend: Backend) -> None:
    a = await bury(backend, "mail", "SMTP timeout")
    b = await bury(backend, "mail", "bad address")
    c = await bury(backend, "sms", "SMTP timeout")
    assert await requeue(backend, JobFilter(error="SMTP", task="mail"), "ops") == [a]
    requeued = await backend.job_get(a)
    assert (requeued.state, requeued.attempt) == (JobState.PENDING, 0)
    assert requeued.audit[-1]["what"] == "requeue" and requeued.audit[-1]["who"] == "ops"
    assert await discard(backend, JobFilter(ids=(b,)), "ops") == [b]
    assert (await backend.job_get(b)).state is JobState.CANCELLED
    assert (await backend.job_get(b)).audit[-1]["what"] == "discard"
    assert await requeue(backend, JobFilter(ids=(b,)), "ops") == []  # not dead now
    assert await requeue(backend, JobFilter(), "ops") == [c]


async def test_prune_deletes_past_retention_in_batches(backend: Backend, clock: FakeClock) -> None:
    """Rows past retention go a batch at a time. At noon (UTC) of today, so the hour the clock
    moves stays inside the day: on PostgreSQL a history day whose end passed the cutoff goes
    whole (tests/backends/test_storage.py), which at 23:30 failed the batch count here."""
    clock.now = clock.now.replace(hour=12, minute=0, second=0)
    ids = await backend.job_insert_many(JobInsertManyParams([new_job() for _ in range(5)]))
    claimed = await backend.job_get_available(claim())
    await backend.job_set_state_if_running_many(
        [Completion(c.id, c.lease_token, Disposition.SUCCEED) for c in claimed]
    )
    dead = await bury(backend, "x", "boom")
    clock.advance(3600)
    assert await backend.job_prune_preview(JobPruneParams(1800, 86400, 1)) == {"succeeded": 5}
    assert await backend.job_prune_preview(JobPruneParams(1800, 1800, 1)) == {
        "succeeded": 5,
        "dead": 1,
    }
    assert await backend.job_prune(JobPruneParams(1800, 86400, 2)) == 2
    assert await backend.job_prune(JobPruneParams(1800, 86400, 10)) == 3
    assert await backend.job_prune(JobPruneParams(1800, 86400, 10)) == 0
    assert await backend.job_prune_preview(JobPruneParams(1800, 86400, 1)) == {}
    assert (await backend.job_get(dead)).state is JobState.DEAD  # dead rows keep longer
    with pytest.raises(JobNotFound):
        await backend.job_get(ids[0])


async def test_audit_and_error_times_read_as_iso_8601_utc_on_both_backends(
    backend: Backend, clock: FakeClock
) -> None:
    """One format whatever wrote the entry: the database (a person's action, a reclaim) or
    the worker; PostgreSQL's jsonb keeps a timestamptz in the session's zone, SQLite seconds."""
    clock.now = clock.now.replace(microsecond=250_000)
    pending, running = await backend.job_insert_many(JobInsertManyParams([new_job(), new_job()]))
    await cancel(backend, pending, "ops")
    await backend.job_get_available(claim())
    clock.advance(3600)
    assert await backend.job_reclaim_expired() == [running]
    cancelled, reclaimed = await backend.job_get(pending), await backend.job_get(running)
    assert cancelled.audit[-1]["at"] == (clock.now - timedelta(hours=1)).isoformat()
    assert reclaimed.errors[-1]["at"] == clock.now.isoformat()
    assert clock.now.isoformat().endswith("+00:00")


async def test_a_flagged_job_whose_lease_expires_is_cancelled_not_run_again(
    backend: Backend, clock: FakeClock
) -> None:
    """Cancelling a running job whose worker is gone: the flag cannot reach a worker, so the
    sweep that finds its lease expired cancels it (it used to go back to pending and run)."""
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job(max_attempts=5)]))
    await backend.job_get_available(claim())
    assert await cancel(backend, job_id, "ops") is JobState.RUNNING
    clock.advance(3600)
    assert await backend.job_reclaim_expired() == [job_id]
    record = await backend.job_get(job_id)
    assert (record.state, record.finished_at) == (JobState.CANCELLED, clock.now)
    assert await backend.job_get_available(claim()) == []


async def test_state_counts_and_the_search_by_key_or_correlation_id(backend: Backend) -> None:
    dead = await bury(backend, "x", "boom")
    keyed, correlated, plain = await backend.job_insert_many(
        JobInsertManyParams(
            [
                new_job(unique_key="order-7"),
                new_job(correlation_id="req-abc", queue="other"),
                new_job(correlation_id="order-7x"),  # not an exact match: not found
            ]
        )
    )
    counts = await backend.job_count_states(JobListParams(JobFilter(), None))
    assert counts == {"pending": 3, "dead": 1}
    in_default = await backend.job_count_states(JobListParams(JobFilter(queue="default"), None))
    assert in_default == {"pending": 2, "dead": 1}
    assert await backend.job_count_states(JobListParams(JobFilter(error="BOOM"), None)) == {
        "dead": 1
    }
    assert [j.id for j in await backend.job_find(JobFindParams("order-7", 10))] == [keyed]
    assert [j.id for j in await backend.job_find(JobFindParams("req-abc", 10))] == [correlated]
    assert await backend.job_find(JobFindParams("req", 10)) == []
    assert dead and plain
