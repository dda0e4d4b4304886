"""``SkiplockBackend``: Django's task framework backed by skiplock's job table.

Enqueue runs on Django's own connection of the tasks database, so it joins the caller's
``transaction.atomic()``: a rollback enqueues nothing and in-process workers are woken on
commit. Each Django task becomes a skiplock task named by its module path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from datetime import datetime
from typing import Any, TypeVar

from django.conf import settings
from django.db import connections, transaction
from django.tasks import Task, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from ..._app import App
from ..._task import Task as SkiplockTask
from ...errors import JobNotFound
from . import _result_ids, _results, _runner, checks
from ._urls import database_url
from .options import per_job_options, registered_options
from .task_class import SkiplockDjangoTask

T = TypeVar("T")


_REGISTERED: set[str] = set()
"""The ``module_path`` of every Django task any SkiplockBackend of this process registered (on
any thread): the only names a job row may resolve to."""


def registered_task(name: str) -> Any:
    """The Django task a job row's ``name`` denotes, or None: only a name registered in this
    process resolves (issue 22: ``import_string`` on whatever a row held let anyone who can
    write the jobs table pick a module for the worker or a ``get_result`` view to import). Its
    module is already imported, so the look-up imports nothing new."""
    if name not in _REGISTERED:
        return None
    try:
        found = import_string(name)
    except ImportError:
        return None
    return found if isinstance(found, Task) else None


class _ResolvingTasks(dict[str, SkiplockTask[Any, Any]]):
    """The task table of a worker: a job naming a Django task registered in this process but not
    with this backend registers it here, so no task list has to be kept in sync (Django's
    backends are per thread: a worker on another thread than the one that imported the tasks
    has a backend of its own, whose table starts empty). Any other name is unknown: the job
    goes to dead saying so."""

    def __init__(self, register: Callable[[Any], Any]) -> None:
        super().__init__()
        self._register = register

    def get(self, name: str, default: Any = None) -> Any:
        if name not in self:
            found = registered_task(name)
            if found is None:
                return default
            if name not in self:
                self._register(found)
        return super().get(name, default)


class DjangoTaskApp(App):
    """A skiplock App whose workers find Django tasks by the module path a job names."""

    def __init__(self, url: str, register: Callable[[Any], Any]) -> None:
        super().__init__(url)
        self.tasks = _ResolvingTasks(register)

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the app's own loop thread from sync Django code (views, admin,
        ``get_result``): one loop and one pool for every sync caller of this process."""
        return self._run_sync(coro)

    def wake(self, queues: Iterable[str]) -> None:
        """Wake this process's workers of ``queues`` (called at commit: see ``enqueue``)."""
        self._wake_queues(queues)


MAX_PREPARED_TASKS = 1024
"""How many ``using()`` variants of Django tasks a backend keeps prepared (``_prepared``)."""


def _hashable(task: Any) -> bool:
    try:
        hash(task)
    except TypeError:  # a task class of a project's own with an unhashable field
        return False
    return True


def _aware(when: datetime | None) -> datetime | None:
    """``run_after`` as an aware time: with ``USE_TZ=False`` Django's ``timezone.now()`` is
    naive local time (``TIME_ZONE``), which skiplock, storing UTC, would refuse."""
    if when is None or timezone.is_aware(when):
        return when
    aware: datetime = timezone.make_aware(when, timezone.get_default_timezone())
    return aware


class SkiplockBackend(BaseTaskBackend):  # type: ignore[misc]
    task_class = SkiplockDjangoTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        valid = self.options if isinstance(self.options, dict) else {}  # else: a check error
        self.database: str = valid.get("database", "default")
        self._app: DjangoTaskApp | None = None
        self._prepared_tasks: dict[Any, SkiplockTask[Any, Any]] = {}

    @property
    def app(self) -> DjangoTaskApp:
        """The skiplock App on this backend's database (its own pool, opened lazily)."""
        if self._app is None:
            db = settings.DATABASES[self.database]
            options = self.options if isinstance(self.options, dict) else {}
            url = options.get("url") or database_url(db, options.get("schema"))
            self._app = DjangoTaskApp(url, self.skiplock_task)
        return self._app

    def check(self, **kwargs: Any) -> list[Any]:
        """Django's system checks of this backend's OPTIONS (``manage.py check``)."""
        return [*super().check(**kwargs), *checks.check_options(self.alias, self.options)]

    def validate_task(self, task: Any) -> None:
        super().validate_task(task)
        self.skiplock_task(task)

    def skiplock_task(self, task: Any) -> SkiplockTask[Any, Any]:
        """The skiplock task running ``task`` (registered once, by module path)."""
        name = task.module_path
        _REGISTERED.add(name)
        tasks = self.app.tasks
        if name not in tasks:
            _, run = _runner.runner(task, type(self), lambda: tasks[name])
            # each using() copy validates again: the first registration is the task's
            self.app.task(name=name, **registered_options(task))(run)
        return tasks[name]

    def _prepared(self, task: Any) -> SkiplockTask[Any, Any]:
        """The skiplock task as ``task`` enqueues it (its queue, priority, run_after and
        per-job options). Kept per task (a ``using()`` copy is a task of its own) unless it
        has a ``run_after``, whose copies come and go: a kept one remembers the call shapes
        that bind, and building it is two dataclass copies at every enqueue otherwise."""
        keep = task.run_after is None and _hashable(task)
        if keep:
            kept = self._prepared_tasks.get(task)
            if kept is not None:
                return kept
        prepared = self.skiplock_task(task).using(
            queue=task.queue_name,
            priority=task.priority,
            run_after=_aware(task.run_after),
            **per_job_options(task.func),
        )
        if keep and len(self._prepared_tasks) < MAX_PREPARED_TASKS:
            self._prepared_tasks[task] = prepared
        return prepared

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        self.validate_task(task)
        # Django's own JSON rules first (tuples → lists, bytes → str; anything else is its
        # "Unsupported type" TypeError), as every Django backend's TaskResult applies them
        args, kwargs = normalize_json(args), normalize_json(kwargs)
        conn = connections[self.database]
        conn.ensure_connection()
        job = self._prepared(task).prepare(*args, **kwargs)
        (handle,) = self.app.enqueue_many_sync([job], connection=conn.connection)
        transaction.on_commit(lambda: self.app.wake([task.queue_name]), using=self.database)
        result = self._ready_result(task, handle.id, args, kwargs)
        task_enqueued.send(type(self), task_result=result)
        return result

    def _ready_result(self, task: Any, job_id: int, args: Any, kwargs: Any) -> Any:
        return TaskResult(
            task=task,
            id=_result_ids.result_id(job_id, self.alias),
            status=TaskResultStatus.READY,
            enqueued_at=timezone.now(),  # naive local under USE_TZ=False, as Django's own
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )

    def get_result(self, result_id: str) -> Any:
        moved = self._moved_job_id(str(result_id))
        try:
            job_id = moved if moved is not None else _result_ids.job_id(result_id, self.alias)
            record = self.app.run_sync(self.app.get_job(job_id))
        except (ValueError, JobNotFound):
            raise TaskResultDoesNotExist(result_id) from None
        task = registered_task(record.task)
        if task is None:
            raise TaskResultDoesNotExist(
                f"{result_id}: its task {record.task!r} is not a registered task of this process "
                "(its module is imported at startup: a tasks module of an installed app, or one "
                "imported from there)"
            )
        result = _results.to_task_result(task, record, self.alias)
        if moved is not None:
            object.__setattr__(result, "id", str(result_id))  # a moved row keeps its old id
        return result

    def _moved_job_id(self, result_id: str) -> int | None:
        """The job a django-tasks-db row became (``manage.py import_tasks_db`` keeps its old
        id, a UUID: never a job id, signed or not), or None."""
        if result_id.isdigit() or ":" in result_id:
            return None  # a job id, plain or signed: no lookup for the ordinary case
        from django.apps import apps

        # by the app registry, not an import: models reach up to the ledger (PeriodicDefer's
        # claim_slot), which reaches this backend, and the import graph keeps no circle
        ImportedTask = apps.get_model("skiplock", "ImportedTask")
        # not filtered by alias: the last step of a switch may rename the backend's alias
        found = (
            ImportedTask.objects.using(self.database)
            .filter(old_id=result_id)
            .values_list("job_id", flat=True)
            .first()
        )
        return None if found is None else int(found)

    async def aget_result(self, result_id: str) -> Any:
        # On the app's own loop, not the caller's: a pool opened on a short-lived loop
        # (asyncio.run, a test) would be left open when that loop ends.
        return await asyncio.to_thread(self.get_result, result_id)
