"""``@periodic``: run a Django task on a cron schedule, with django-tasks-concurrent's names.

The decorator only records the wish (importing tasks must not touch the database): a
``PeriodicTask`` in ``PERIODIC_TASKS``, keyed like the seed's registry by
``(task_name, periodic_id)``. Who enqueues it depends on the task's backend: a worker of a
``SkiplockBackend`` hands it to skiplock's own scheduler (``attach_periodic_tasks``); a worker
of django-tasks-db's ``DatabaseBackend``, ``defer_periodic_tasks`` and
``run_scheduler_thread`` sweep it (``scheduler.py``). Both claim each slot in the same ledger
(skiplock's slot table, under ``schedule_id``), so a slot enqueues once whoever sweeps it.
Schedules are evaluated in ``settings.TIME_ZONE``; a 6th cron field is seconds, last.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from ..._cron import CronExpression, zone

log = logging.getLogger("skiplock.contrib.django")

DEFAULT_MAX_DELAY_S = 600.0
LOOKBACK_LIMIT = timedelta(days=400)
"""How far back ``current_slot`` looks for a slot (a yearly cron's previous one)."""


def _zone() -> ZoneInfo:
    from django.conf import settings

    return zone(settings.TIME_ZONE or "UTC")


def _aware(now: datetime | None) -> datetime:
    """``now`` as an aware instant (naive means UTC, as skiplock's clock: USE_TZ=False too)."""
    if now is None:
        return datetime.now(UTC)
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


@dataclass(frozen=True)
class PeriodicTask:
    """One ``@periodic`` registration (the seed's fields and properties)."""

    task: Any
    cron: str
    periodic_id: str = ""
    queue_name: str = ""
    task_kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def expression(self) -> CronExpression:
        return CronExpression(self.cron)

    @property
    def task_name(self) -> str:
        """The task's module path (django-tasks-db's ``task_path``, skiplock's task name)."""
        return str(self.task.module_path)

    @property
    def key(self) -> tuple[str, str]:
        return (self.task_name, self.periodic_id)

    @property
    def schedule_id(self) -> str:
        """The schedule's name in skiplock's slot ledger: the ``periodic_id`` if given (unique
        across tasks, checked at decoration), else the task's module path."""
        return self.periodic_id or self.task_name

    @property
    def title(self) -> str:
        name = f"{self.task_name}[{self.periodic_id}]" if self.periodic_id else self.task_name
        return f"{name} ({self.cron})"

    @property
    def bound_task(self) -> Any:
        """The task as enqueued: on the ``queue_name`` override if there is one."""
        return self.task.using(queue_name=self.queue_name) if self.queue_name else self.task

    @property
    def backend_alias(self) -> str:
        return str(self.bound_task.backend)

    def next_slot(self, now: datetime | None = None) -> datetime:
        """The next firing strictly after ``now``, as aware UTC."""
        return next(self.expression.next_fires(_aware(now), _zone()))

    def current_slot(self, now: datetime | None = None) -> datetime | None:
        """The most recent firing at or before ``now``, as aware UTC (None if there was none
        in the last 400 days). Looks back in doubling windows, so a per-second cron costs
        two steps and a yearly one a few dozen."""
        now = _aware(now)
        tz, window = _zone(), timedelta(seconds=2)
        while True:
            start = now - window
            last = None
            for fire in self.expression.next_fires(start - timedelta(microseconds=1), tz):
                if fire > now:
                    break
                last = fire
            if last is not None or window >= LOOKBACK_LIMIT:
                return last
            window = min(window * 4, LOOKBACK_LIMIT)

    def slot_kwargs(self, slot: datetime) -> dict[str, Any]:
        """``task_kwargs``, plus ``timestamp`` (the slot, Unix seconds) when the task takes it
        by name or through ``**kwargs`` (the seed passed it always: ``*args`` tasks failed)."""
        kwargs = dict(self.task_kwargs)
        if takes_timestamp(self.task.func):
            kwargs["timestamp"] = int(slot.timestamp())
        return kwargs


def takes_timestamp(func: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True  # cannot tell: pass it, as the seed always did
    return any(p.name == "timestamp" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


PERIODIC_TASKS: dict[tuple[str, str], PeriodicTask] = {}
"""Every ``@periodic`` registration imported so far, by ``(task_name, periodic_id)``."""


def periodic(
    cron: str,
    *,
    periodic_id: str = "",
    queue_name: str = "",
    task_kwargs: Mapping[str, Any] | None = None,
) -> Callable[[Any], Any]:
    """Put above ``@task``; returns the same task object. Everything is checked here, at
    import: the cron, ``task_kwargs`` (a dict without ``timestamp``), the queue override
    (against the backend's ``QUEUES``), and a key reused with another cron."""
    CronExpression(cron)  # a bad expression fails at import, naming itself
    if task_kwargs is not None and not isinstance(task_kwargs, Mapping):
        raise TypeError(f"@periodic({cron!r}): task_kwargs must be a dict (got {task_kwargs!r})")
    if task_kwargs and "timestamp" in task_kwargs:
        raise ValueError(
            f"@periodic({cron!r}): task_kwargs may not contain 'timestamp' (the scheduler "
            "passes the slot as timestamp to tasks that accept it)"
        )
    try:
        json.dumps(dict(task_kwargs or {}))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"@periodic({cron!r}): task_kwargs must be JSON ({exc})") from None
    for name, value in (("periodic_id", periodic_id), ("queue_name", queue_name)):
        if not isinstance(value, str):
            raise TypeError(f"@periodic({cron!r}): {name} must be a string (got {value!r})")

    def register(task: Any) -> Any:
        if not hasattr(task, "module_path") or not hasattr(task, "func"):
            raise TypeError(
                f"@periodic({cron!r}) must wrap a django-tasks @task: put it above @task "
                f"(got {task!r})"
            )
        entry = PeriodicTask(task, cron, periodic_id, queue_name, dict(task_kwargs or {}))
        entry.bound_task  # noqa: B018 -- a queue not in the backend's QUEUES fails here
        old = PERIODIC_TASKS.get(entry.key)
        if old is not None and old.cron != cron:
            raise ValueError(
                f"{entry.task_name} is already registered as periodic with a different cron "
                f"({old.cron!r}); pass a distinct periodic_id"
            )
        for other in PERIODIC_TASKS.values():
            if other.key != entry.key and other.schedule_id == entry.schedule_id:
                raise ValueError(
                    f"periodic_id={periodic_id!r} is already used by {other.title}; pass a "
                    "distinct periodic_id"
                )
        PERIODIC_TASKS[entry.key] = entry
        log.debug("Registered periodic task %s", entry.title)
        return task

    return register


def registered_periodic_tasks() -> list[PeriodicTask]:
    """Every ``@periodic`` registration imported so far, in registration order."""
    return list(PERIODIC_TASKS.values())


def max_delay_seconds() -> float:
    """``PERIODIC_MAX_DELAY_SECONDS`` (default 600): a slot older than this never fires."""
    from django.conf import settings

    return float(getattr(settings, "PERIODIC_MAX_DELAY_SECONDS", DEFAULT_MAX_DELAY_S))


def attach_periodic_tasks(backend: Any) -> None:
    """Give ``backend``'s skiplock App a Schedule per periodic task of this backend (once);
    each slot its scheduler enqueues sends ``task_enqueued``, as any enqueue does."""
    from django.conf import settings

    max_delay = max_delay_seconds()
    app = backend.app
    announced = _announced(backend)
    for spec in registered_periodic_tasks():
        if spec.backend_alias != backend.alias or spec.schedule_id in app.schedules:
            continue
        announced[spec.schedule_id] = spec
        task = spec.bound_task
        app.schedule(
            backend.skiplock_task(task),
            spec.cron,
            name=spec.schedule_id,
            tz=settings.TIME_ZONE or "UTC",
            kwargs=spec.task_kwargs,
            max_delay=max_delay,
            queue=task.queue_name,
            priority=task.priority,
        )


def _announced(backend: Any) -> dict[str, PeriodicTask]:
    """The periodic tasks whose slots ``backend``'s app announces, by schedule id; the first
    call subscribes to the app's enqueued slots."""
    announced: dict[str, PeriodicTask] | None = getattr(backend, "_periodic_announced", None)
    if announced is None:
        announced = backend._periodic_announced = {}
        backend.app.registry.on_slot_enqueued(functools.partial(_slot_enqueued, backend))
    return announced


def _slot_enqueued(backend: Any, schedule: Any, slot: datetime, job_id: int, job: Any) -> None:
    """``task_enqueued`` for a slot the scheduler enqueued (on its loop: sent where receivers
    may use the ORM, without holding the scheduler up)."""
    from django.tasks.signals import task_enqueued

    from ..._payload import decode_args
    from ._signals import send_soon

    spec = getattr(backend, "_periodic_announced", {}).get(schedule.id)
    if spec is None:
        return  # a schedule of the app's own (app.schedule), not a @periodic one
    args, kwargs = decode_args(job.args_json, job.kwargs_json)
    result = backend._ready_result(spec.bound_task, job_id, args, kwargs)
    send_soon(task_enqueued, type(backend), result)
