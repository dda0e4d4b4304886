"""A run nobody watches builds no ``TaskResult`` and sends no signal when it succeeds, and
reports a failure as a watched run does (issue 42: the Django drain's CPU).

Nobody watches when Django's own per-task log lines are quieted (``django.tasks`` above INFO, as
a busy project sets it), no receiver of ``task_started``/``task_finished`` is connected and the
task takes no context: the ``TaskResult`` and the two signals of a success would reach only
receivers that drop them. Each test runs on both databases."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.tasks import TaskResultStatus
from django.tasks.signals import task_finished, task_started

from skiplock.contrib.django import _runner

from .project.demo import outcome_tasks, tasks


def burst() -> None:
    call_command("concurrent_worker", "--burst", "--no-scheduler", "--interval=0.05")


@pytest.fixture
def quiet() -> Iterator[None]:
    """Django's per-task log lines off, as a project that quiets them sets it."""
    logger = logging.getLogger("django.tasks")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every ``TaskResult`` the worker's wrapper of a Django task builds."""
    made: list[Any] = []
    real = _runner.TaskResult

    def counted(**fields: Any) -> Any:
        result = real(**fields)
        made.append(result)
        return result

    monkeypatch.setattr(_runner, "TaskResult", counted)
    return made


class FailedLines(logging.Handler):
    """The ERROR lines Django's own receiver writes for a failed task, by result id."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.ids: set[str] = set()
        self.arrived = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self.arrived:
            self.ids.add(str(record.args[0]) if isinstance(record.args, tuple) else "")
            self.arrived.notify_all()

    def wait_for(self, result_id: str, timeout: float = 20.0) -> bool:
        with self.arrived:
            return self.arrived.wait_for(lambda: result_id in self.ids, timeout)


@pytest.fixture
def failed_lines() -> Iterator[FailedLines]:
    handler = FailedLines()
    logger = logging.getLogger("django.tasks")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def test_a_success_nobody_watches_builds_no_task_result(quiet: None, built: list[Any]) -> None:
    added = tasks.add.enqueue(1, 2)
    doubled = tasks.async_double.enqueue(4)
    burst()
    assert tasks.add.get_result(added.id).return_value == 3
    assert tasks.async_double.get_result(doubled.id).return_value == 8
    # before: one TaskResult a run, and two signals sent to nobody (a job an earlier test
    # left ready may run in this burst too: only these two are counted)
    assert [r for r in built if str(r.id) in {str(added.id), str(doubled.id)}] == []


@pytest.mark.parametrize("watcher", ["task_started", "task_finished", "log at INFO", "context"])
def test_any_watcher_makes_a_run_build_and_send_its_result(
    quiet: None, built: list[Any], watcher: str
) -> None:
    seen: list[str] = []

    def receiver(task_result: Any, **_: Any) -> None:
        seen.append(str(task_result.status))

    signal = {"task_started": task_started, "task_finished": task_finished}.get(watcher)
    task: Any = tasks.attempt_of if watcher == "context" else tasks.add
    args = () if watcher == "context" else (1, 2)
    result = task.enqueue(*args)
    if signal is not None:
        signal.connect(receiver)
    if watcher == "log at INFO":
        logging.getLogger("django.tasks").setLevel(logging.INFO)
    try:
        burst()
    finally:
        if signal is not None:
            signal.disconnect(receiver)
    assert task.get_result(result.id).status == TaskResultStatus.SUCCESSFUL
    assert [str(r.id) for r in built if str(r.id) == str(result.id)] == [str(result.id)]
    if watcher == "task_started":
        assert seen == [TaskResultStatus.RUNNING]
    if watcher == "task_finished":
        assert seen == [TaskResultStatus.SUCCESSFUL]
    if watcher == "context":
        assert task.get_result(result.id).return_value == {"attempt": 1, "id": str(result.id)}


@pytest.mark.parametrize(
    ("task", "args"),
    [
        (tasks.explode, ("x",)),
        (tasks.async_explode, ("x",)),
        (tasks.returns_a_set, ()),
        (outcome_tasks.async_returns_a_set, ()),
        (outcome_tasks.sleeps_past_its_timeout, (1.0,)),
        (outcome_tasks.awaits_past_its_timeout, (5.0,)),
    ],
)
def test_a_failure_nobody_watches_is_stored_and_logged_as_a_watched_one(
    quiet: None, failed_lines: FailedLines, task: Any, args: Any
) -> None:
    result = task.enqueue(*args)
    burst()
    assert task.get_result(result.id).status == TaskResultStatus.FAILED
    # Django's own receiver still writes its ERROR line, from the result built at the failure
    # (a timed-out sync task's thread returns after the row was written: its line follows)
    assert failed_lines.wait_for(str(result.id)), failed_lines.ids


def test_a_backoff_is_asked_with_the_result_when_nobody_watches(quiet: None) -> None:
    outcome_tasks.BACKOFF_CALLS.clear()
    result = outcome_tasks.fails_with_a_backoff.enqueue()
    burst()
    done = outcome_tasks.fails_with_a_backoff.get_result(result.id)
    assert done.status == TaskResultStatus.FAILED
    assert done.attempts == 2  # of 5: the backoff said None after the second
    calls = outcome_tasks.BACKOFF_CALLS
    assert [c["attempts"] for c in calls] == [1, 2]
    assert {(c["exception"], c["status"], c["error"]) for c in calls} == {
        ("ValueError", "FAILED", "builtins.ValueError")
    }


def test_a_receiver_connected_after_unwatched_runs_is_sent_the_next(
    quiet: None, built: list[Any]
) -> None:
    """Whether a run is watched is read again once the signals' receivers change (it is
    remembered between runs while they do not)."""
    first = tasks.add.enqueue(1, 1)
    burst()
    seen: list[str] = []

    def receiver(task_result: Any, **_: Any) -> None:
        seen.append(str(task_result.id))

    task_finished.connect(receiver)
    try:
        second = tasks.add.enqueue(2, 2)
        burst()
    finally:
        task_finished.disconnect(receiver)
    third = tasks.add.enqueue(3, 3)
    burst()
    ours = {str(first.id), str(second.id), str(third.id)}
    assert [str(r.id) for r in built if str(r.id) in ours] == [str(second.id)]
    assert [i for i in seen if i in ours] == [str(second.id)]
