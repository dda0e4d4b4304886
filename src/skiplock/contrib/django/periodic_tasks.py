"""``@periodic``: run a Django task on a cron schedule, on skiplock's own cron engine.

The decorator only records the wish (importing tasks must not touch the database or the
backend); ``attach_periodic_tasks`` hands each one to its backend's skiplock App as a
``Schedule`` when a worker starts, so the once-per-slot ledger and missed-run policy are
skiplock's. Schedules are evaluated in ``settings.TIME_ZONE``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._cron import CronExpression

DEFAULT_MAX_DELAY_S = 600.0


@dataclass(frozen=True)
class PeriodicTask:
    """One ``@periodic`` registration: the Django task, its cron and its fixed kwargs."""

    task: Any
    cron: str
    periodic_id: str
    task_kwargs: Mapping[str, Any] = field(default_factory=dict)


_REGISTERED: dict[str, PeriodicTask] = {}


def periodic(
    cron: str, *, periodic_id: str | None = None, task_kwargs: Mapping[str, Any] | None = None
) -> Callable[[Any], Any]:
    """Put above ``@task``; returns the same task object."""
    CronExpression(cron)  # a bad expression fails at import, naming itself
    if task_kwargs is not None and not isinstance(task_kwargs, Mapping):
        raise TypeError(f"@periodic({cron!r}): task_kwargs must be a dict (got {task_kwargs!r})")
    if task_kwargs and "timestamp" in task_kwargs:
        raise ValueError(
            f"@periodic({cron!r}): task_kwargs may not contain 'timestamp' (the scheduler "
            "passes the slot as timestamp to tasks that accept it)"
        )

    def register(task: Any) -> Any:
        if not hasattr(task, "module_path") or not hasattr(task, "func"):
            raise TypeError(f"@periodic({cron!r}): put it above @task (got {task!r})")
        pid = periodic_id or task.module_path
        if pid in _REGISTERED and _REGISTERED[pid].task.module_path != task.module_path:
            raise ValueError(f"periodic_id={pid!r} is already used; pass a distinct periodic_id")
        _REGISTERED[pid] = PeriodicTask(task, cron, pid, dict(task_kwargs or {}))
        return task

    return register


def registered_periodic_tasks() -> tuple[PeriodicTask, ...]:
    """Every ``@periodic`` registration imported so far."""
    return tuple(_REGISTERED.values())


def attach_periodic_tasks(backend: Any) -> None:
    """Give ``backend``'s skiplock App a Schedule per periodic task of this backend (once)."""
    from django.conf import settings

    max_delay = float(getattr(settings, "PERIODIC_MAX_DELAY_SECONDS", DEFAULT_MAX_DELAY_S))
    app = backend.app
    for spec in registered_periodic_tasks():
        if spec.task.backend != backend.alias or spec.periodic_id in app.schedules:
            continue
        app.schedule(
            backend.skiplock_task(spec.task),
            spec.cron,
            name=spec.periodic_id,
            tz=settings.TIME_ZONE or "UTC",
            kwargs=spec.task_kwargs,
            max_delay=max_delay,
            queue=spec.task.queue_name,
            priority=spec.task.priority,
        )
