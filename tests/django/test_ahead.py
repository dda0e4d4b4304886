"""Ahead of Django: ``@task(max_attempts=, backoff=)`` as django/new-features#142 proposes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.tasks import TaskResultStatus, task
from django.tasks.signals import task_finished

from skiplock.contrib.django import skiplock_options
from skiplock.contrib.django.models import Job
from skiplock.errors import ConfigurationError

from .project.demo import outcome_tasks


def burst() -> None:
    call_command("concurrent_worker", "--burst", "--no-scheduler", "--interval=0.05")


def test_backoff_is_asked_after_each_failure_and_none_stops_the_retries() -> None:
    outcome_tasks.BACKOFF_CALLS.clear()
    statuses: list[str] = []

    def receiver(task_result: Any, **_: Any) -> None:
        statuses.append(task_result.status)

    result = outcome_tasks.fails_with_a_backoff.enqueue()
    task_finished.connect(receiver)
    try:
        burst()
    finally:
        task_finished.disconnect(receiver)
    done = outcome_tasks.fails_with_a_backoff.get_result(result.id)
    assert done.status == TaskResultStatus.FAILED
    assert done.attempts == 2  # of 5: the backoff said None after the second
    assert statuses == [TaskResultStatus.READY, TaskResultStatus.FAILED]
    calls = outcome_tasks.BACKOFF_CALLS
    assert [c["attempts"] for c in calls] == [1, 2]
    assert {(c["exception"], c["status"], c["error"]) for c in calls} == {
        ("ValueError", "FAILED", "builtins.ValueError")
    }


def test_backoff_seconds_delay_the_next_attempt() -> None:
    result = outcome_tasks.retried_a_minute_later.enqueue()
    burst()
    job = Job.objects.get(id=int(result.id))
    assert job.state == "pending"
    assert job.attempt == 1
    assert timedelta(seconds=55) < job.run_at - job.attempted_at < timedelta(seconds=65)


def test_max_attempts_given_twice_must_agree() -> None:
    def twice() -> None: ...

    twice.__module__ = __name__
    twice.__qualname__ = "twice"
    with pytest.raises(ConfigurationError, match="disagree"):
        task(max_attempts=2)(skiplock_options(max_attempts=3)(twice))


def test_a_backoff_that_is_not_callable_is_refused() -> None:
    def not_callable_backoff() -> None: ...

    not_callable_backoff.__module__ = __name__
    not_callable_backoff.__qualname__ = "not_callable_backoff"
    with pytest.raises(ConfigurationError, match="backoff must be callable"):
        task(backoff=5)(not_callable_backoff)


def _queued(marker: int) -> int:
    """Jobs of ``elsewhere(marker)`` in the jobs' own database (read on Django's connection)."""
    return sum(
        1 for args in Job.objects.using("jobs").values_list("args", flat=True) if args == [marker]
    )


def test_enqueue_on_commit_waits_for_the_open_transaction_of_another_database() -> None:
    from django.db import transaction

    from .project.demo import tasks

    marker = 7001
    with transaction.atomic(using="default"):  # the task's rows: not the jobs' database
        tasks.elsewhere.enqueue_on_commit(marker)
        assert _queued(marker) == 0
    assert _queued(marker) == 1


def test_enqueue_on_commit_enqueues_nothing_on_rollback() -> None:
    from django.db import transaction

    from .project.demo import tasks

    marker = 7002
    with pytest.raises(RuntimeError), transaction.atomic(using="default"):
        tasks.elsewhere.enqueue_on_commit(marker)
        raise RuntimeError("rolled back")
    assert _queued(marker) == 0


def test_enqueue_on_commit_waits_for_every_open_transaction() -> None:
    from django.db import transaction

    from .project.demo import tasks

    marker = 7003
    with transaction.atomic(using="jobs"):
        with transaction.atomic(using="default"):
            tasks.elsewhere.enqueue_on_commit(marker)
        assert _queued(marker) == 0  # default committed; the jobs' transaction is still open
    assert _queued(marker) == 1


def test_enqueue_on_commit_outside_a_transaction_enqueues_now() -> None:
    from .project.demo import tasks

    tasks.elsewhere.enqueue_on_commit(7004)
    assert _queued(7004) == 1


def _decided(attempt: int, reclaims: int, attempts: int, backoff: Any = None) -> tuple[bool, float]:
    """Decide a failure of attempt ``attempt`` (``reclaims`` of them lost with a worker) of
    a task with ``attempts`` of its own, as the worker's classify then reads it back."""
    import contextvars
    from datetime import UTC, datetime

    from skiplock._job import JobContext, set_current_job
    from skiplock.contrib.django import retries

    def run() -> tuple[bool, float]:
        now = datetime.now(UTC)
        job_id = 10**12 + attempt * 1000 + reclaims * 10 + attempts
        set_current_job(JobContext(job_id, "t", "q", attempt, attempts + 2, now, None, now))
        error = ValueError("x")
        retries.decide(error, None, attempts=attempts, backoff=backoff, reclaims=reclaims)
        final = isinstance(error, retries.FinalForDjango)
        return final, retries.DecidedDelay(base_s=7.0, jitter=False).delay(attempt)

    return contextvars.copy_context().run(run)


def test_reclaims_do_not_spend_a_task_s_own_attempts() -> None:
    """max_attempts=3: the third attempt after one reclaim is only its second failure."""
    assert _decided(attempt=3, reclaims=0, attempts=3)[0] is True
    assert _decided(attempt=3, reclaims=1, attempts=3)[0] is False
    assert _decided(attempt=4, reclaims=1, attempts=3)[0] is True
    assert _decided(attempt=1, reclaims=0, attempts=1)[0] is True


def test_backoff_decides_the_delay_the_worker_reads() -> None:
    assert _decided(1, 0, 3, backoff=lambda exc, result: 42) == (False, 42.0)
    assert _decided(1, 0, 3, backoff=lambda exc, result: None)[0] is True
    assert _decided(2, 0, 3, backoff=lambda exc, result: float("nan"))[0] is True  # logged
    assert _decided(2, 0, 5) == (False, 14.0)  # no backoff: its own policy (7 s, doubled)
