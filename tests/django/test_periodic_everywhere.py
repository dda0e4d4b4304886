"""``@periodic`` wherever the seed ran it (issue 21 §1): ``defer_periodic_tasks(now=None)``,
the scheduler thread and the worker on django-tasks-db's ``DatabaseBackend`` as on a
``SkiplockBackend``, each slot claimed once in skiplock's ledger and enqueued through the
task's own backend; a failing schedule logged and retried, not fatal; a backend no skiplock
scheduler can serve is a system check error."""

from __future__ import annotations

import collections
import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.tasks.signals import task_enqueued

from skiplock.contrib.django.models import Job
from skiplock.contrib.django.periodic_tasks import PERIODIC_TASKS, periodic
from skiplock.contrib.django.scheduler import (
    defer_periodic_tasks,
    run_scheduler_thread,
    seconds_until_next_slot,
)

from .processes import WorkerProcesses, wait_for
from .project.demo import tasks

NOON = datetime(2030, 1, 1, 12, 0, 30, tzinfo=UTC)
"""Far from any real slot another test's workers could claim."""

BACKENDS = {  # alias -> (a task there, a second one)
    "tasksdb": (tasks.stamp, tasks.stamp_too),
    "jobs": (tasks.stamp_jobs, tasks.stamp_jobs_too),
}


@pytest.fixture
def schedule() -> Iterator[Callable[..., Any]]:
    """``@periodic`` for one test: the registrations are removed at its end."""
    added: list[tuple[str, str]] = []

    def add(task: Any, cron: str, **options: Any) -> Any:
        before = set(PERIODIC_TASKS)
        periodic(cron=cron, **options)(task)
        added.extend(set(PERIODIC_TASKS) - before)
        return task

    yield add
    for key in added:
        PERIODIC_TASKS.pop(key, None)


@pytest.fixture
def enqueued() -> Iterator[list[Any]]:
    """Every TaskResult enqueued during the test, by any backend (task_enqueued)."""
    seen: list[Any] = []

    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(task_result)

    task_enqueued.connect(receiver, weak=False)
    yield seen
    task_enqueued.disconnect(receiver)


def _of(results: list[Any], task: Any) -> list[Any]:
    return [r for r in results if r.task.module_path == task.module_path]


@pytest.mark.parametrize("alias", sorted(BACKENDS))
def test_a_due_slot_fires_once_with_its_timestamp(
    alias: str, schedule: Any, enqueued: list[Any]
) -> None:
    task, _ = BACKENDS[alias]
    schedule(task, "* * * * *", periodic_id=f"due-{alias}", task_kwargs={"value": 1})
    assert defer_periodic_tasks(NOON, backend_alias=alias) == 1
    (fired,) = _of(enqueued, task)
    assert fired.backend == alias
    assert fired.kwargs == {"value": 1, "timestamp": int(NOON.timestamp()) - 30}
    assert defer_periodic_tasks(NOON, backend_alias=alias) == 0  # claimed: once per slot
    assert defer_periodic_tasks(NOON + timedelta(seconds=5), backend_alias=alias) == 0
    assert defer_periodic_tasks(NOON + timedelta(minutes=1), backend_alias=alias) == 1
    assert len(_of(enqueued, task)) == 2


@pytest.mark.parametrize("alias", sorted(BACKENDS))
def test_only_what_is_due_now_fires(alias: str, schedule: Any, enqueued: list[Any]) -> None:
    """A slot older than PERIODIC_MAX_DELAY_SECONDS never fires, on the first call or later."""
    from django.test import override_settings

    task, other = BACKENDS[alias]
    schedule(task, "0 3 * * *", periodic_id=f"daily-{alias}")
    assert defer_periodic_tasks(NOON, backend_alias=alias) == 0  # 03:00 is 9 hours old
    with override_settings(PERIODIC_MAX_DELAY_SECONDS=1):
        schedule(other, "* * * * *", periodic_id=f"strict-{alias}")
        assert defer_periodic_tasks(NOON, backend_alias=alias) == 0  # 30 s old > 1 s
    assert enqueued == []


@pytest.mark.parametrize("alias", sorted(BACKENDS))
def test_a_failed_enqueue_gives_its_slot_back_and_the_others_fire(
    alias: str, schedule: Any, enqueued: list[Any]
) -> None:
    task, other = BACKENDS[alias]
    schedule(task, "* * * * *", periodic_id=f"failing-{alias}")
    schedule(other, "* * * * *", periodic_id=f"fine-{alias}")
    failures = {"left": 1}

    def refuse(sender: Any, task_result: Any, **kwargs: Any) -> None:
        if task_result.task.module_path == task.module_path and failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("a project's task_enqueued receiver failed")

    def stored() -> int:
        if alias == "tasksdb":
            from django_tasks_db.models import DBTaskResult

            return DBTaskResult.objects.filter(task_path=task.module_path).count()
        return Job.objects.using("jobs").filter(task=task.module_path).count()

    before = stored()
    task_enqueued.connect(refuse, weak=False)
    try:
        assert defer_periodic_tasks(NOON, backend_alias=alias) == 1  # the other one
        assert stored() == before  # the failed enqueue's row went with its claim
        assert defer_periodic_tasks(NOON, backend_alias=alias) == 1  # the slot came back
    finally:
        task_enqueued.disconnect(refuse)
    assert len(_of(enqueued, other)) == 1 and len(_of(enqueued, task)) == 2
    assert stored() == before + 1


@pytest.mark.parametrize("alias", sorted(BACKENDS))
def test_a_failing_schedule_is_retried_after_1s_then_2s(alias: str, schedule: Any) -> None:
    """The loops' sweeper (run_scheduler_thread, the worker's) retries a failed schedule
    after 1 s, doubling, as docs/django.md says, and wakes for it; not at every sweep."""
    from skiplock.contrib.django.scheduler import _Sweeper

    task, _ = BACKENDS[alias]
    schedule(task, "* * * * *", periodic_id=f"backoff-{alias}")
    attempts = {"n": 0, "refuse": True}

    def refuse(sender: Any, task_result: Any, **kwargs: Any) -> None:
        if task_result.task.module_path == task.module_path:
            attempts["n"] += 1
            if attempts["refuse"]:
                raise RuntimeError("a project's task_enqueued receiver failed")

    def at(seconds: float) -> datetime:
        return NOON + timedelta(seconds=seconds)

    sweeper = _Sweeper(alias)
    task_enqueued.connect(refuse, weak=False)
    try:
        assert (sweeper.sweep(at(0)), attempts["n"]) == (0, 1)
        assert sweeper.sleep_s(15, at(0.5)) == 0.5  # it wakes for the retry
        assert (sweeper.sweep(at(0.5)), attempts["n"]) == (0, 1)  # not yet
        assert (sweeper.sweep(at(1)), attempts["n"]) == (0, 2)  # 1 s later
        attempts["refuse"] = False
        assert (sweeper.sweep(at(2.5)), attempts["n"]) == (0, 2)  # then 2 s
        assert (sweeper.sweep(at(3)), attempts["n"]) == (1, 3)
    finally:
        task_enqueued.disconnect(refuse)
    assert sweeper.sweep(at(4)) == 0  # fired: claimed, once per slot


def test_a_task_taking_no_timestamp_gets_only_its_task_kwargs(
    schedule: Any, enqueued: list[Any]
) -> None:
    schedule(tasks.stamp_args, "* * * * *", periodic_id="no-timestamp")
    assert defer_periodic_tasks(NOON, backend_alias="tasksdb") == 1
    (fired,) = _of(enqueued, tasks.stamp_args)
    assert (fired.args, fired.kwargs) == ([], {})
    assert fired.task.call(*fired.args, **fired.kwargs) == []  # it runs (the seed's: TypeError)


def test_seconds_until_next_slot_is_the_next_real_slot(schedule: Any) -> None:
    schedule(tasks.stamp, "* * * * *", periodic_id="sleep")
    assert seconds_until_next_slot(NOON, 3600, backend_alias="tasksdb") == 30.5
    assert seconds_until_next_slot(NOON, 15, backend_alias="tasksdb") == 15
    assert seconds_until_next_slot(NOON, 15, backend_alias="nothing-here") == 15
    boundary = NOON.replace(second=59, microsecond=900_000)
    assert 0 <= seconds_until_next_slot(boundary, 15, backend_alias="tasksdb") <= 0.6


def test_the_scheduler_thread_wakes_at_each_slot_not_each_interval(schedule: Any) -> None:
    """interval is the ceiling of one sleep: a per-second schedule fires every second with
    interval=30 (the old thread swept every interval)."""
    from django_tasks_db.models import DBTaskResult

    schedule(tasks.stamp, "* * * * * *", periodic_id="thread")
    started = int(time.time())

    def slots() -> set[int]:
        rows = DBTaskResult.objects.filter(task_path=tasks.stamp.module_path)
        stamps = {row.args_kwargs["kwargs"].get("timestamp", 0) for row in rows}
        return {s for s in stamps if s >= started}

    stop = run_scheduler_thread(interval=30, backend_alias="tasksdb")
    try:
        assert "periodic-scheduler" in {t.name for t in threading.enumerate()}
        wait_for(lambda: len(slots()) >= 3, 15, "three per-second slots from the thread")
    finally:
        stop.set()


def test_a_backend_no_worker_serves_is_a_check_error(schedule: Any) -> None:
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    schedule(tasks.at_once, "* * * * *")
    with pytest.raises(SystemCheckError, match=r"skiplock\.E006.*at_once.*ImmediateBackend"):
        call_command("check")


def test_one_schedules_failing_slots_do_not_stop_the_worker(workers: WorkerProcesses) -> None:
    """The tick's first two slots fail to build: logged, retried, and the worker goes on
    (it exited 1 on the first)."""
    started = time.time()
    proc = workers.start(
        "concurrent_worker",
        "--interval=0.1",
        "--shutdown-timeout=10",
        env={"SKIPLOCK_DJANGO_FAULTS": "slot-enqueue-fails"},
    )

    def ran() -> collections.Counter[int]:
        rows = Job.objects.filter(task=tasks.tick.module_path, state="succeeded")
        stamps = [int(kw["timestamp"]) for kw in rows.values_list("kwargs", flat=True)]
        return collections.Counter(s for s in stamps if s >= int(started))

    def ticking() -> bool:
        assert proc.process.poll() is None, proc.output()  # still running
        return len(ran()) >= 2

    wait_for(ticking, 40, "ticks run after the failing slots")
    proc.signal(signal.SIGTERM)
    assert proc.wait() == 0, proc.output()
    assert "injected fault: this slot's job cannot be built" in proc.output()
    assert "retrying in" in proc.output()
    assert max(ran().values()) == 1
