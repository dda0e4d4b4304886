"""Run a worker from Django (``manage.py concurrent_worker``/``task_worker``, ``run_worker``).

The options are django-tasks-concurrent's (concurrency, interval, queue names, backend alias,
shutdown timeout); they are checked here, at the edge, with an error naming the option and what
is valid. A ``SkiplockBackend`` alias runs skiplock's own ``Worker`` (there is no second
worker); a django-tasks-db ``DatabaseBackend`` alias runs ``TasksDbWorker`` on that package's
table, so a project on the seed's stack switches worker without migrating data.

Signal handlers (SIGTERM/SIGINT/SIGQUIT: drain; a second one skips the drain) are installed
only when running on the main thread, so ``run_worker`` also works from another thread: pass it
a ``WorkerHandle`` and call ``handle.stop()`` from anywhere. Cancelling ``run_worker_async``
stops the worker the same way (running tasks are drained or released, never left RUNNING)
before the cancellation goes on.

A Django task's lease defaults to ``DJANGO_LEASE_S``. (Claiming no job ahead, ``prefetch=0``,
would make every RUNNING row a started one, but cut the no-op drain rate from 9,607 to 1,331
tasks/s on PostgreSQL, measured: the adaptive prefetch is kept; see ``_results.py``.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import Any, Protocol, TypedDict

from ..._config import WorkerConfig
from ..._service import Service
from ..._worker.supervisor import report_ready
from ..._worker.worker import Worker
from ...errors import SchemaError
from ._ledger import is_tasks_db as _is_tasks_db

log = logging.getLogger("skiplock.contrib.django")


class WorkerOptionError(ValueError):
    """A worker option a user passed is not valid; the message names it and what is valid."""


class _Stoppable(Protocol):
    def request_stop(self) -> None: ...


DJANGO_LEASE_S = 30.0
"""The lease of a Django task without a timeout, before the worker's 30 s margin is added
(60 s in all; skiplock's own default here was 300 + 30 s): Django's tasks are short, and a
task whose worker died waits out its lease before it runs again. Heartbeats renew it every
third of it while the worker lives, so a longer task keeps it."""

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)


class WorkerHandle:
    """Stops a ``run_worker``/``run_worker_async`` from any thread: ``stop()`` drains (running
    tasks get the shutdown timeout, then are released), a second ``stop()`` skips the drain.
    A stop asked before the worker started stops it as soon as it starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: _Stoppable | None = None
        self._stops = 0

    def stop(self) -> None:
        with self._lock:
            self._stops += 1
            loop, worker = self._loop, self._worker
        if loop is not None and worker is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended: nothing to stop
                loop.call_soon_threadsafe(worker.request_stop)

    @contextlib.contextmanager
    def _serving(self, worker: _Stoppable) -> Iterator[None]:
        with self._lock:
            self._loop, self._worker, pending = asyncio.get_running_loop(), worker, self._stops
        for _ in range(min(pending, 2)):
            worker.request_stop()
        try:
            yield
        finally:
            with self._lock:
                self._loop = self._worker = None


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
    lease: float = DJANGO_LEASE_S,
) -> WorkerConfig:
    """The WorkerConfig of these options, or a WorkerOptionError naming the bad one."""
    from .retention import retention_of

    _check_numbers(concurrency, interval, shutdown_timeout)
    check_lease(lease)
    finished_s, dead_s = retention_of(getattr(backend, "options", None))
    return WorkerConfig(
        retention_finished_s=finished_s,
        retention_dead_s=dead_s,
        queues=_queues(backend, queue_names),
        concurrency=concurrency,
        poll_interval_s=interval,
        shutdown_timeout_s=shutdown_timeout,
        scheduler=scheduler,
        default_lease_s=lease,
    )


MIN_LEASE_S, MAX_LEASE_S = 1.0, 86400.0


def check_lease(lease: float) -> None:
    if not isinstance(lease, int | float) or not MIN_LEASE_S <= lease <= MAX_LEASE_S:
        raise WorkerOptionError(
            f"--lease must be a number of seconds in {MIN_LEASE_S:g}..{MAX_LEASE_S:g} "
            f"(got {lease!r})"
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
    lease: float
    handle: WorkerHandle | None


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
    lease: float = DJANGO_LEASE_S,
    handle: WorkerHandle | None = None,
) -> None:
    """Work the backend's tasks on this loop until SIGTERM/SIGINT/SIGQUIT (a second one skips
    the drain), ``handle.stop()`` or, with ``burst``, until nothing is ready. Raises when the
    worker (or its scheduler) dies, so the command exits non-zero. Cancelled, it stops the
    worker gracefully first (see the module doc).

    The seed's options keep their meaning: ``queue_name`` (default ``TASK_QUEUE_NAME`` or
    ``default``; here also a comma list or ``*``), ``backend_name``, ``scheduler_interval``
    (the ceiling of one scheduler sleep: schedules wake at their next slot)."""
    handle = handle or WorkerHandle()
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
        ready = _reporting_ready(tasks_db.ready)
        with _stopped_by_signals(tasks_db), ready, handle._serving(tasks_db):
            async with _tasks_db_scheduler(tasks_db, backend_name, scheduler, scheduler_interval):
                await _stopped_when_cancelled(tasks_db, tasks_db.run(burst=burst))
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
        lease=lease,
    )
    if scheduler:
        from .periodic_tasks import attach_periodic_tasks

        attach_periodic_tasks(backend)
    worker = Worker(backend.app, config)
    _SERVING[backend.app] = _SERVING.get(backend.app, 0) + 1
    try:
        with _stopped_by_signals(worker), _reporting_ready(worker.ready), handle._serving(worker):
            await _stopped_when_cancelled(worker, worker.run(burst=burst))
    except SchemaError as exc:
        raise SchemaError(migrate_hint(backend, exc)) from exc
    finally:
        _SERVING[backend.app] -= 1
        if not _SERVING[backend.app]:  # the last worker of this app here: close its pool, as
            del _SERVING[backend.app]  # the loop may end with it (not under another worker)
            await backend.app.close()


_SERVING: dict[Any, int] = {}
"""Workers running per app in this process (several may share one loop and one app)."""


async def _stopped_when_cancelled(worker: _Stoppable, run: Coroutine[Any, Any, None]) -> None:
    """Run the worker; a cancellation from outside asks it to stop and waits for that stop
    (its tasks drained or released to pending) before it is passed on, so no job is left
    RUNNING under a lease nobody renews."""
    task = asyncio.ensure_future(run)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.done():
            raise
        worker.request_stop()
        with contextlib.suppress(asyncio.CancelledError):  # a second cancel: skip the drain
            await asyncio.shield(task)
        if not task.done():
            worker.request_stop()
            await asyncio.gather(task, return_exceptions=True)
        raise


def migrate_hint(backend: Any, exc: SchemaError) -> str:
    """skiplock's schema error in a Django project's words: ``manage.py migrate`` creates the
    schema (``skiplock migrate`` is the CLI's verb, for projects without Django)."""
    detail = str(exc).split(": run `skiplock migrate", 1)[0]
    database = "" if backend.database == "default" else f" --database={backend.database}"
    return f"task backend {backend.alias!r}: {detail}: run `manage.py migrate{database}`"


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
    sweeper = _Sweeper(interval, alias, defer_periodic_forever)

    def failed(exc: BaseException) -> None:
        log.error("Periodic scheduler failed, stopping worker: %s", exc)
        worker.request_stop()

    sweeper.on_error = failed
    sweeper.spawn()
    try:
        yield
    finally:
        sweeper.stop()
        await sweeper.join()
    if sweeper.error is not None:
        raise RuntimeError("the periodic scheduler died") from sweeper.error


class _Sweeper(Service):
    """The periodic sweep beside a tasks-db worker, on the one lifecycle (detached)."""

    name = "periodic-scheduler"

    def __init__(
        self, interval: float, alias: str, sweep: Callable[[float, str], Awaitable[None]]
    ) -> None:
        super().__init__()
        self._interval, self._alias, self._sweep = interval, alias, sweep

    async def serve(self) -> None:
        await self._sweep(self._interval, self._alias)


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


@contextlib.contextmanager
def _stopped_by_signals(worker: _Stoppable) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread; the caller stops this worker
        return
    loop = asyncio.get_running_loop()
    if not _RUNNING:
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, _stop_all, sig)
    _RUNNING.add(worker)
    try:
        yield
    finally:
        _RUNNING.discard(worker)
        if not _RUNNING:
            for sig in STOP_SIGNALS:
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
    lease: float = DJANGO_LEASE_S,
    handle: WorkerHandle | None = None,
) -> None:
    """``run_worker_async`` on a loop of its own (the management commands' entry); the
    options are ``WorkerOptions``: pass ``handle=WorkerHandle()`` to stop it from another
    thread."""
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
            lease=lease,
            handle=handle,
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
        self._handle = WorkerHandle()

    async def run(self) -> None:
        self.running = True
        self._handle = WorkerHandle()  # a shutdown() before this run does not stop it
        try:
            await run_worker_async(
                self.backend_name,
                concurrency=self.concurrency,
                interval=self.interval,
                queue_name=self.queue_name,
                scheduler_interval=self.scheduler_interval,
                handle=self._handle,
            )
        finally:
            self.running = False

    def shutdown(self) -> None:
        """Stop claiming and drain (a second call skips the drain)."""
        self.running = False
        self._handle.stop()

    def on_scheduler_finished(self, task: asyncio.Task[Any]) -> None:
        """The seed's done-callback: a scheduler that died stops the worker."""
        if not task.cancelled() and task.exception() is not None:
            log.error("Periodic scheduler failed, stopping worker: %s", task.exception())
            self.shutdown()
