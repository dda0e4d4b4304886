"""Run a Django task inside skiplock's worker: signals, TaskContext, stale connections.

The skiplock task registered for a Django task is a thin wrapper: it rebuilds the Django
``TaskResult`` from the running job, sends Django's own ``task_started``/``task_finished``
(sent robustly: a receiver that raises is logged, never strands the job), and returns the
function's value as JSON for the job row.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.db import close_old_connections
from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.signals import task_finished, task_started
from django.utils.json import normalize_json

from ..._job import current_job
from ._result_ids import result_id

log = logging.getLogger("skiplock.contrib.django")


def _running_result(
    task: Any, sender: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    job = current_job()
    now = datetime.now(UTC)
    result = TaskResult(
        task=task,
        id=result_id(job.id, task.backend),
        status=TaskResultStatus.RUNNING,
        enqueued_at=job.enqueued_at,
        started_at=now,
        finished_at=None,
        last_attempted_at=now,
        args=list(args),
        kwargs=dict(kwargs),
        backend=task.backend,
        errors=[],
        worker_ids=["skiplock"] * job.attempt,
    )
    _send(task_started, sender, result)
    return result


def _finish(sender: type[Any], result: Any, status: str) -> None:
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", datetime.now(UTC))
    _send(task_finished, sender, result)


def _send(signal: Any, sender: type[Any], result: Any) -> None:
    """Send with the backend's class as sender, as Django's own workers do."""
    for receiver, outcome in signal.send_robust(sender, task_result=result):
        if isinstance(outcome, Exception):
            log.error("%s receiver %r raised", signal, receiver, exc_info=outcome)


def _call_args(task: Any, result: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    if task.takes_context:
        return (TaskContext(task_result=result), *args)
    return args


def _with_signature(run: Callable[..., Any], task: Any) -> Callable[..., Any]:
    """Give ``run`` the task's call signature (without the context parameter), so skiplock
    checks arity at enqueue and its scheduler passes ``timestamp`` only where it is asked."""
    try:
        signature = inspect.signature(task.func)
    except (TypeError, ValueError):
        return run
    params = list(signature.parameters.values())[1 if task.takes_context else 0 :]
    run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return run


def sync_runner(task: Any, sender: type[Any]) -> Callable[..., Any]:
    """The skiplock function of a sync Django task (run on skiplock's thread pool)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            result = _running_result(task, sender, args, kwargs)
            try:
                value = task.func(*_call_args(task, result, args), **kwargs)
            except BaseException:
                _finish(sender, result, TaskResultStatus.FAILED)
                raise
            _finish(sender, result, TaskResultStatus.SUCCESSFUL)
            return normalize_json(value)
        finally:
            close_old_connections()

    return _with_signature(run, task)


def async_runner(task: Any, sender: type[Any]) -> Callable[..., Any]:
    """The skiplock function of an async Django task (run on the worker's loop)."""

    async def run(*args: Any, **kwargs: Any) -> Any:
        result = _running_result(task, sender, args, kwargs)
        try:
            value = await task.func(*_call_args(task, result, args), **kwargs)
        except BaseException:
            _finish(sender, result, TaskResultStatus.FAILED)
            raise
        _finish(sender, result, TaskResultStatus.SUCCESSFUL)
        return normalize_json(value)

    return _with_signature(run, task)
