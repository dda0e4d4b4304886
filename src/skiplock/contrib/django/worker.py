"""Run a worker from Django (``manage.py concurrent_worker``/``task_worker``, ``run_worker``).

The options are django-tasks-concurrent's (concurrency, interval, queue names, backend alias,
shutdown timeout); they are checked here, at the edge, with an error naming the option and what
is valid. A ``SkiplockBackend`` alias runs skiplock's own ``Worker`` (there is no second
worker); a django-tasks-db ``DatabaseBackend`` alias runs ``TasksDbWorker`` on that package's
table, so a project on the seed's stack switches worker without migrating data.

Signal handlers (SIGTERM/SIGINT: drain; a second one skips the drain) are installed only when
running on the main thread, so ``run_worker`` also works from another thread (the caller
stops it there with ``request_stop`` or by ending the process).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import signal
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Protocol, TypedDict

from ..._config import WorkerConfig
from ..._worker.supervisor import report_ready
from ..._worker.worker import Worker
from ._ledger import is_tasks_db as _is_tasks_db

log = logging.getLogger("skiplock.contrib.django")


class WorkerOptionError(ValueError):
    """A worker option a user passed is not valid; the message names it and what is valid."""


class _Stoppable(Protocol):
    def request_stop(self) -> None: ...


TASKS_DB_BACKEND = "django_tasks_db.DatabaseBackend"


def _backend(alias: str) -> Any:
    from django.tasks import task_backends

    from .backend import SkiplockBackend

    valid = sorted(task_backends)
    if alias not in valid:
        raise WorkerOptionError(f"--backend: unknown backend {alias!r} (valid: {', '.join(valid)})")
    backend = task_backends[alias]
    if not isinstance(backend, SkiplockBackend) and not _is_tasks_db(backend):
        raise WorkerOptionError(
            f"--backend: {alias!r} is a {type(backend).__name__}; concurrent_worker serves a "
            f"skiplock.contrib.django.SkiplockBackend or a {TASKS_DB_BACKEND}"
        )
    return backend


def split_queue_names(names: Sequence[str] | None) -> list[str]:
    """``--queue-name a,b --queue-name c`` → ``[a, b, c]`` (blank entries dropped)."""
    return [n.strip() for name in names or () for n in name.split(",") if n.strip()]


def _queues(backend: object, names: Sequence[str] | None) -> tuple[str, ...] | None:
    names = split_queue_names(names)
    if not names or "*" in names:
        return None
    allowed = list(getattr(backend, "queues", ()) or ())
    unknown = [n for n in names if allowed and n not in allowed]
    if unknown:
        raise WorkerOptionError(
            f"--queue-name: unknown queue {unknown[0]!r} (valid: {', '.join(sorted(allowed))}, *)"
        )
    return tuple(names)


def _check_numbers(concurrency: int, interval: float, shutdown_timeout: float) -> None:
    if not isinstance(concurrency, int) or concurrency < 1:
        raise WorkerOptionError(f"--concurrency must be at least 1 (got {concurrency})")
    if not interval > 0 or interval == float("inf"):
        raise WorkerOptionError(f"--interval must be a positive number of seconds (got {interval})")
    if not shutdown_timeout >= 0 or shutdown_timeout == float("inf"):
        raise WorkerOptionError(f"--shutdown-timeout must be >= 0 (got {shutdown_timeout})")


def build_config(
    *,
    backend: object,
    concurrency: int,
    interval: float,
    queue_names: Sequence[str] | None,
    shutdown_timeout: float,
    scheduler: bool,
) -> WorkerConfig:
    """The WorkerConfig of these options, or a WorkerOptionError naming the bad one."""
    _check_numbers(concurrency, interval, shutdown_timeout)
    return WorkerConfig(
        queues=_queues(backend, queue_names),
        concurrency=concurrency,
        poll_interval_s=interval,
        shutdown_timeout_s=shutdown_timeout,
        scheduler=scheduler,
    )


class WorkerOptions(TypedDict, total=False):
    """``run_worker``'s options: the seed's five, then skiplock's own."""

    concurrency: int
    interval: float
    queue_name: str
    backend_name: str
    scheduler_interval: float
    queue_names: Sequence[str] | None
    shutdown_timeout: float
    scheduler: bool
    burst: bool


DEFAULT_CONCURRENCY = 3
"""The seed's default; ``--concurrency`` takes more (async and sync tasks alike run at once)."""


def default_queue_name() -> str:
    """``settings.TASK_QUEUE_NAME`` (the seed's setting), else Django's ``default``."""
    from django.conf import settings

    return str(getattr(settings, "TASK_QUEUE_NAME", "") or "default")


def worker_queue_names(queue_name: str = "", queue_names: Sequence[str] | None = None) -> list[str]:
    """The queues a worker works: ``queue_names`` (repeatable option), else ``queue_name``
    (both take comma lists and ``*``), else the default queue."""
    names = split_queue_names(queue_names) or split_queue_names([queue_name] if queue_name else [])
    return names or [default_queue_name()]


def _check_scheduler_interval(scheduler_interval: float) -> None:
    if not isinstance(scheduler_interval, int | float) or not 0 < scheduler_interval < 1e9:
        raise WorkerOptionError(
            f"--scheduler-interval must be a positive number of seconds (got {scheduler_interval})"
        )


async def run_worker_async(
    backend_name: str = "default",
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    interval: float = 1.0,
    queue_name: str = "",
    scheduler_interval: float = 15.0,
    queue_names: Sequence[str] | None = None,
    shutdown_timeout: float = 30.0,
    scheduler: bool = True,
    burst: bool = False,
) -> None:
    """Work the backend's tasks on this loop until SIGTERM/SIGINT (a second one skips the
    drain) or, with ``burst``, until nothing is ready. Raises when the worker (or its
    scheduler) dies, so the command exits non-zero.

    The seed's options keep their meaning: ``queue_name`` (default ``TASK_QUEUE_NAME`` or
    ``default``; here also a comma list or ``*``), ``backend_name``, ``scheduler_interval``
    (the ceiling of one scheduler sleep: schedules wake at their next slot)."""
    backend = _backend(backend_name)
    _check_scheduler_interval(scheduler_interval)
    queues = worker_queue_names(queue_name, queue_names)
    if _is_tasks_db(backend):
        from .tasks_db_worker import TasksDbWorker

        _check_numbers(concurrency, interval, shutdown_timeout)
        tasks_db = TasksDbWorker(
            backend,
            concurrency=concurrency,
            interval=interval,
            queue_names=_queues(backend, queues),
            shutdown_timeout=shutdown_timeout,
        )
        with _stopped_by_signals(tasks_db), _reporting_ready(tasks_db.ready):
            async with _tasks_db_scheduler(tasks_db, backend_name, scheduler, scheduler_interval):
                await tasks_db.run(burst=burst)
        global ABANDONED_THREADS
        ABANDONED_THREADS += tasks_db.abandoned_threads
        return
    config = build_config(
        backend=backend,
        concurrency=concurrency,
        interval=interval,
        queue_names=queues,
        shutdown_timeout=shutdown_timeout,
        scheduler=scheduler,
    )
    if scheduler:
        from .periodic_tasks import attach_periodic_tasks

        attach_periodic_tasks(backend)
    worker = Worker(backend.app, config)
    try:
        with _stopped_by_signals(worker), _reporting_ready(worker.ready):
            await worker.run(burst=burst)
    finally:
        await backend.app.close()  # this loop's pool: the loop may end with the worker


@contextlib.asynccontextmanager
async def _tasks_db_scheduler(
    worker: _Stoppable, alias: str, scheduler: bool, interval: float
) -> AsyncIterator[None]:
    """The ``@periodic`` tasks of a django-tasks-db backend, swept beside its worker (the
    seed's side task): the worker's end cancels it; its death (not one schedule's failed
    enqueue, which it retries) stops the worker, which then raises that error."""
    from .scheduler import _entries, defer_periodic_forever

    if not scheduler or not _entries(alias):
        yield
        return
    sweeping = asyncio.create_task(
        defer_periodic_forever(interval, alias), name="periodic-scheduler"
    )

    def finished(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("Periodic scheduler failed, stopping worker: %s", task.exception())
            worker.request_stop()

    sweeping.add_done_callback(finished)
    try:
        yield
    finally:
        sweeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeping
    if not sweeping.cancelled() and sweeping.exception() is not None:
        raise RuntimeError("the periodic scheduler died") from sweeping.exception()


ABANDONED_THREADS = 0
"""Sync tasks still running on a thread when their worker gave up waiting (shutdown timeout):
the management command exits without joining them."""


@contextlib.contextmanager
def _reporting_ready(ready: asyncio.Event) -> Iterator[None]:
    """Tell a ``--processes`` supervisor once the worker is ready (nothing without one)."""

    async def report() -> None:
        await ready.wait()
        report_ready()

    reporter = asyncio.ensure_future(report())
    try:
        yield
    finally:
        reporter.cancel()


_RUNNING: set[_Stoppable] = set()
"""Workers run_worker_async runs on this process's main-thread loop: one signal stops all."""


_ON_START: contextvars.ContextVar[Callable[[_Stoppable], None] | None] = contextvars.ContextVar(
    "skiplock_django_on_start", default=None
)
"""Told the worker ``run_worker_async`` built (``ConcurrentWorker`` keeps it to stop it)."""


@contextlib.contextmanager
def _stopped_by_signals(worker: _Stoppable) -> Iterator[None]:
    started = _ON_START.get()
    if started is not None:
        started(worker)
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread; the caller stops this worker
        return
    loop = asyncio.get_running_loop()
    if not _RUNNING:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, _stop_all, sig)
    _RUNNING.add(worker)
    try:
        yield
    finally:
        _RUNNING.discard(worker)
        if not _RUNNING:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)


def _stop_all(sig: int) -> None:
    log.info("received %s: draining (send it again to skip the drain)", signal.Signals(sig).name)
    for worker in list(_RUNNING):
        worker.request_stop()


def run_worker(
    backend_name: str = "default",
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    interval: float = 1.0,
    queue_name: str = "",
    scheduler_interval: float = 15.0,
    queue_names: Sequence[str] | None = None,
    shutdown_timeout: float = 30.0,
    scheduler: bool = True,
    burst: bool = False,
) -> None:
    """``run_worker_async`` on a loop of its own (the management commands' entry); the
    options are ``WorkerOptions``."""
    asyncio.run(
        run_worker_async(
            backend_name,
            concurrency=concurrency,
            interval=interval,
            queue_name=queue_name,
            scheduler_interval=scheduler_interval,
            queue_names=queue_names,
            shutdown_timeout=shutdown_timeout,
            scheduler=scheduler,
            burst=burst,
        )
    )


class ConcurrentWorker:
    """django-tasks-concurrent's worker class, over ``run_worker_async`` (same options):
    ``await worker.run()`` works the backend's tasks until ``shutdown()`` (which drains, as
    SIGTERM does) or a signal."""

    def __init__(
        self,
        concurrency: int,
        interval: float,
        queue_name: str,
        backend_name: str = "default",
        scheduler_interval: float = 15.0,
    ) -> None:
        self.concurrency = concurrency
        self.interval = interval
        self.queue_name = queue_name
        self.backend_name = backend_name
        self.scheduler_interval = scheduler_interval
        self.worker_id = f"concurrent-{uuid.uuid4().hex}"
        self.running = False
        self.scheduler_task: asyncio.Task[None] | None = None
        """Always None: the scheduler is a service inside the worker (its death stops it)."""
        self._workers: list[_Stoppable] = []

    async def run(self) -> None:
        self.running = True
        token = _ON_START.set(self._workers.append)
        try:
            await run_worker_async(
                self.backend_name,
                concurrency=self.concurrency,
                interval=self.interval,
                queue_name=self.queue_name,
                scheduler_interval=self.scheduler_interval,
            )
        finally:
            _ON_START.reset(token)
            self.running = False

    def shutdown(self) -> None:
        """Stop claiming and drain (a second call skips the drain)."""
        self.running = False
        for worker in self._workers:
            worker.request_stop()

    def on_scheduler_finished(self, task: asyncio.Task[Any]) -> None:
        """The seed's done-callback: a scheduler that died stops the worker."""
        if not task.cancelled() and task.exception() is not None:
            log.error("Periodic scheduler failed, stopping worker: %s", task.exception())
            self.shutdown()
