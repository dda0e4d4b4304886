"""The backend's whole Django Tasks API, each on PostgreSQL and SQLite (see conftest)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.tasks import TaskResultStatus
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone

from .project.demo import tasks


def test_atomic_commit_enqueues(run_worker: Any) -> None:
    with transaction.atomic():
        result = tasks.add.enqueue(1, 1)
    run_worker()
    assert tasks.add.get_result(result.id).return_value == 2


def test_atomic_rollback_enqueues_nothing() -> None:
    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        result = tasks.add.enqueue(1, 2)
        raise Rollback
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)


def test_exception_is_failed_with_class_path_and_traceback(run_worker: Any) -> None:
    result = tasks.explode.enqueue("kaboom")
    run_worker()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    (error,) = result.errors
    assert error.exception_class is tasks.Boom
    assert "kaboom" in error.traceback
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value


def test_unfinished_has_no_return_value() -> None:
    result = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)
    fetched = tasks.add.get_result(result.id)
    assert fetched.status == TaskResultStatus.READY
    with pytest.raises(ValueError, match="not finished"):
        _ = fetched.return_value


def test_async_task_aenqueue_aget_result(run_worker: Any) -> None:
    result = asyncio.run(tasks.async_double.aenqueue(21))
    run_worker()
    fetched = asyncio.run(tasks.async_double.aget_result(result.id))
    assert fetched.return_value == 42
    assert fetched.last_attempted_at is not None
    assert len(fetched.worker_ids) == 1


def test_takes_context_sees_attempt(run_worker: Any) -> None:
    result = tasks.attempt_of.enqueue()
    run_worker()
    assert tasks.attempt_of.get_result(result.id).return_value == {"attempt": 1, "id": result.id}


def test_retries_from_skiplock_options(run_worker: Any) -> None:
    result = tasks.flaky.enqueue("x")
    run_worker()
    fetched = tasks.flaky.get_result(result.id)
    assert fetched.status == TaskResultStatus.SUCCESSFUL
    assert fetched.return_value == 2
    assert fetched.attempts == 2


def test_django_tasks_do_not_retry_by_default(run_worker: Any) -> None:
    result = tasks.explode.enqueue("once")
    run_worker()
    assert tasks.explode.get_result(result.id).attempts == 1


def test_unique_key_returns_the_live_job() -> None:
    first = tasks.unique.using(run_after=timezone.now() + timedelta(hours=1)).enqueue()
    second = tasks.unique.enqueue()
    assert second.id == first.id


def test_queue_and_priority_are_stored(backend: Any) -> None:
    result = tasks.add.using(queue_name="other", priority=7).enqueue(3, 4)
    record = backend.app.run_sync(backend.app.get_job(int(result.id)))
    assert (record.queue, record.priority) == ("other", 7)


def test_core_signals_fire(run_worker: Any) -> None:
    seen: list[tuple[str, str, str]] = []

    def receiver(name: str) -> Any:
        def record(sender: Any, task_result: Any, **kw: Any) -> None:
            seen.append((name, task_result.id, task_result.status))

        return record

    names = {task_enqueued: "enqueued", task_started: "started", task_finished: "finished"}
    receivers = {signal: receiver(name) for signal, name in names.items()}
    for signal, fn in receivers.items():
        signal.connect(fn)
    try:
        result = tasks.add.enqueue(5, 5)
        run_worker()
    finally:
        for signal, fn in receivers.items():
            signal.disconnect(fn)
    mine = [(name, status) for name, id_, status in seen if id_ == result.id]
    assert mine == [("enqueued", "READY"), ("started", "RUNNING"), ("finished", "SUCCESSFUL")]


def test_get_result_of_unknown_id() -> None:
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result("999999999")
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result("not-a-number")


def test_options_database_routes_jobs_and_transactions(backend: Any) -> None:
    from django.tasks import task_backends

    jobs = task_backends["jobs"]
    result = tasks.elsewhere.enqueue(7)
    jobs.app.run_sync(jobs.app.drain())
    assert tasks.elsewhere.get_result(result.id).return_value == 7
    assert backend.app.url != jobs.app.url

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic(using="jobs"):
        dropped = tasks.elsewhere.enqueue(8)
        raise Rollback
    with pytest.raises(TaskResultDoesNotExist):
        tasks.elsewhere.get_result(dropped.id)


def test_in_process_workers_are_woken_after_commit(backend: Any) -> None:
    woken: list[str] = []
    unsubscribe = backend.app.add_waker(woken.append)
    try:
        with transaction.atomic():
            tasks.add.using(queue_name="other").enqueue(1, 1)
            assert woken == []  # a worker woken now would find nothing committed
        assert woken == ["other"]
    finally:
        unsubscribe()


def test_a_running_row_reads_running_from_its_claim(backend: Any) -> None:
    """A running row reads RUNNING from its claim, not from the heartbeat that marks it
    started (1.6-2.8 s later)."""
    import dataclasses
    from datetime import UTC, datetime

    from skiplock import JobState
    from skiplock.contrib.django._results import to_task_result

    result = tasks.add.enqueue(2, 2)

    async def fetch() -> Any:
        return await (await backend.app.job(int(result.id))).fetch()

    record = backend.app.run_sync(fetch())
    now = datetime.now(UTC)
    claimed = dataclasses.replace(record, state=JobState.RUNNING, attempted_at=now, started_at=None)
    read = to_task_result(tasks.add, claimed, "default")
    assert read.status == TaskResultStatus.RUNNING
    assert read.started_at == now


def test_every_job_state_reads_as_a_django_status(backend: Any) -> None:
    """A waiting row (a workflow's child, a parked job) reads READY, as Django's tasks that
    are enqueued and not yet running do; every state maps (a missing one is a KeyError)."""
    import dataclasses

    from skiplock import JobState
    from skiplock.contrib.django._results import STATUS, to_task_result

    assert set(STATUS) == set(JobState)
    result = tasks.add.enqueue(3, 4)

    async def fetch() -> Any:
        return await (await backend.app.job(int(result.id))).fetch()

    record = backend.app.run_sync(fetch())
    waiting = dataclasses.replace(record, state=JobState.WAITING)
    assert to_task_result(tasks.add, waiting, "default").status == TaskResultStatus.READY
