"""A skiplock job row in Django's words: ``JobRecord`` → ``TaskResult``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.tasks import TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.utils import timezone

from ..._job import JobRecord, JobState
from ._result_ids import result_id
from .retries import lost_by

STATUS = {
    JobState.PENDING: TaskResultStatus.READY,
    JobState.RUNNING: TaskResultStatus.RUNNING,
    JobState.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    JobState.DEAD: TaskResultStatus.FAILED,
    JobState.CANCELLED: TaskResultStatus.FAILED,
    JobState.WAITING: TaskResultStatus.READY,  # enqueued, waiting for its parents or a signal
}


def django_time(when: datetime | None) -> datetime | None:
    """A stored (aware, UTC) time as Django's own backends give it: unchanged with
    ``USE_TZ``, else naive local time in ``TIME_ZONE`` (``timezone.now()``'s kind then), so
    ``timezone.now() - result.enqueued_at`` works either way."""
    if when is None or settings.USE_TZ:
        return when
    naive: datetime = timezone.make_naive(when, timezone.get_default_timezone())
    return naive


def exception_class_path(error: dict[str, Any]) -> str:
    """The raised class's dotted path (older rows without ``type``: read from the message)."""
    if error.get("type"):
        return str(error["type"])
    lines = str(error.get("traceback") or error.get("message") or "").strip().splitlines()
    name = lines[-1].split(":", 1)[0].strip() if lines else "Exception"
    return name if "." in name else f"builtins.{name}"


def task_error(error: dict[str, Any]) -> Any:
    return TaskError(
        exception_class_path=exception_class_path(error),
        traceback=str(error.get("traceback") or error.get("message") or ""),
    )


def worker_ids(record: JobRecord) -> list[str]:
    """Who ran each attempt: a failed attempt's error record names its worker (``worker``),
    one reclaimed from a dead worker names it in its message; an attempt with no record (the
    last one, still running or succeeded) ran on the worker that claimed it (``locked_by``)."""
    last = record.locked_by or "skiplock"
    ran: dict[int, str] = {}
    for error in record.errors:
        attempt = error.get("attempt")
        by = lost_by(error.get("message")) or error.get("worker")
        if isinstance(by, str) and isinstance(attempt, int):
            ran[attempt] = by
    return [ran.get(attempt, last) for attempt in range(1, record.attempt + 1)]


def to_task_result(task: Any, record: JobRecord, backend_alias: str) -> Any:
    """Build the frozen ``TaskResult`` (with its return value) of one job row."""
    # RUNNING from the claim: the heartbeat's started_at comes seconds later. A worker claims
    # ahead only short tasks (none before its first task finished, none while tasks take
    # over a second), so a claimed-ahead row reads RUNNING at most that long too early
    status = STATUS[record.state]
    result = TaskResult(
        task=task,
        id=result_id(record.id, backend_alias),
        status=status,
        enqueued_at=django_time(record.created_at),
        started_at=django_time(record.attempted_at),
        finished_at=django_time(record.finished_at),
        last_attempted_at=django_time(record.attempted_at),
        args=list(record.args),
        kwargs=dict(record.kwargs),
        backend=backend_alias,
        errors=[task_error(e) for e in record.errors[-1:]] if status == "FAILED" else [],
        worker_ids=worker_ids(record),
    )
    object.__setattr__(result, "_return_value", record.result)
    return result
