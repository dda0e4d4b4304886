"""A skiplock job row in Django's words: ``JobRecord`` → ``TaskResult``."""

from __future__ import annotations

from typing import Any

from django.tasks import TaskResult, TaskResultStatus
from django.tasks.base import TaskError

from ..._job import JobRecord, JobState
from ._result_ids import result_id

STATUS = {
    JobState.PENDING: TaskResultStatus.READY,
    JobState.RUNNING: TaskResultStatus.RUNNING,
    JobState.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    JobState.DEAD: TaskResultStatus.FAILED,
    JobState.CANCELLED: TaskResultStatus.FAILED,
}


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


def to_task_result(task: Any, record: JobRecord, backend_alias: str) -> Any:
    """Build the frozen ``TaskResult`` (with its return value) of one job row."""
    status = STATUS[record.state]
    if record.state is JobState.RUNNING and record.started_at is None:
        # claimed ahead by a worker but not started: its code has not run, and a worker
        # that shuts down gives it back, so Django's "currently running" would be untrue
        status = TaskResultStatus.READY
    result = TaskResult(
        task=task,
        id=result_id(record.id, backend_alias),
        status=status,
        enqueued_at=record.created_at,
        started_at=record.started_at or record.attempted_at,
        finished_at=record.finished_at,
        last_attempted_at=record.attempted_at,
        args=list(record.args),
        kwargs=dict(record.kwargs),
        backend=backend_alias,
        errors=[task_error(e) for e in record.errors[-1:]] if status == "FAILED" else [],
        worker_ids=[record.locked_by or "skiplock"] * record.attempt,
    )
    object.__setattr__(result, "_return_value", record.result)
    return result
