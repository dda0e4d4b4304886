"""``App``: the task registry, the configuration, and the way in to the database."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar, overload

from . import _sqlalchemy
from ._app_control import AppControl
from ._app_observe import AppObserve
from ._app_results import AppResults
from ._backends import Backend, open_backend
from ._backends.base import Clock, JobInsertManyParams
from ._config import DEFAULT_MAX_ATTEMPTS, Breaker, RetryPolicy, require
from ._cron import zone
from ._eager import run_eager
from ._job import JobOutcome, NewJob
from ._payload import DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_MAX_RESULT_BYTES
from ._schedule import (
    DEFAULT_MAX_CATCHUP,
    DEFAULT_MAX_DELAY_S,
    MissedPolicy,
    Schedule,
    build_schedule,
)
from ._task import JobHandle, Task, Upcast
from ._tracing import Tracing
from ._url import mask_in, mask_url
from .errors import (
    BackendUnavailable,
    ConfigurationError,
    SchemaError,
    UnknownTask,
)

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

log = logging.getLogger("skiplock")

DEFAULT_URL = "sqlite:///skiplock.db"


async def _unless_set(stopping: asyncio.Event | None, work: Coroutine[Any, Any, None]) -> bool:
    """Await ``work``, unless ``stopping`` is set first: then cancel it and answer False.
    A connect to a server that accepts and never answers must not hold a signal back."""
    if stopping is None:
        await work
        return True
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait((task, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task.cancelled():
        return False
    task.result()  # raises what the work raised
    return True


def _ignore_ids(_ids: Sequence[int]) -> None:
    """What an untraced enqueue does with the ids it inserted."""


class App(AppControl, AppResults, AppObserve):
    """Tasks, configuration and database access for one skiplock deployment.

    ``App()`` reads ``SKIPLOCK_DATABASE_URL`` and falls back to ``sqlite:///skiplock.db``.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        clock: Clock | None = None,
        timezone: str = "UTC",
        eager: bool = False,
    ) -> None:
        self.url = url or os.environ.get("SKIPLOCK_DATABASE_URL") or DEFAULT_URL
        require(max_payload_bytes > 0, "max_payload_bytes", max_payload_bytes, "must be > 0")
        self.max_payload_bytes = max_payload_bytes
        require(max_result_bytes > 0, "max_result_bytes", max_result_bytes, "must be > 0")
        self.max_result_bytes = max_result_bytes
        """The largest return value a job may store, in bytes of JSON (default 256 KiB)."""
        self.clock = clock
        require(isinstance(eager, bool), "eager", eager, "must be a bool")
        self.eager = eager
        """Run each task at enqueue, in the caller's loop, with no database (unit tests)."""
        self.eager_outcomes: dict[int, JobOutcome] = {}
        self.timezone = zone(timezone).key
        """The default zone of schedules that name none."""
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.schedules: dict[str, Schedule] = {}
        self._check_url()
        self._backends: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Backend] = (
            weakref.WeakKeyDictionary()
        )
        self._opening: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._wakers: set[Callable[[str], None]] = set()
        self._waiters = weakref.WeakKeyDictionary()
        self.tracing: Tracing | None = None
        """Span hooks (``skiplock.otel.instrument(app)``); None: untraced, free."""
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        self._sync_lock = threading.Lock()

    def _check_url(self) -> None:
        """Validate the URL now, not at first use; the error shows it with the password
        masked, and without the unmasked original chained to it."""
        try:
            open_backend(self.url)
        except ConfigurationError as exc:
            raise ConfigurationError(mask_in(str(exc), self.url)) from None

    def __repr__(self) -> str:
        return f"App({mask_url(self.url)!r}, tasks={len(self.tasks)})"

    # -- declaring tasks ----------------------------------------------------------------------

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        permanent: tuple[type[BaseException], ...] = (),
        visibility_timeout: float | None = None,
        breaker: Breaker | None = None,
        keep_result: bool = True,
        version: int = 1,
        upcast: Mapping[int, Upcast] | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(  # type: ignore[misc]  # mypy cannot pair a ParamSpec'd bare/with-options form
        self,
        fn: Callable[P, R] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        permanent: tuple[type[BaseException], ...] = (),
        visibility_timeout: float | None = None,
        breaker: Breaker | None = None,
        keep_result: bool = True,
        version: int = 1,
        upcast: Mapping[int, Upcast] | None = None,
    ) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
        """Register a function (async or sync) as a task; usable bare or with options.

        ``version`` is its payload version (stored on each job it enqueues) and ``upcast``
        maps each older version to a function bringing such a payload one version up:
        ``upcast={1: v1_to_v2}``, each ``fn(args, kwargs) -> (args, kwargs)``."""

        def register(f: Callable[P, R]) -> Task[P, R]:
            task_name = name or f"{f.__module__}.{f.__qualname__}"
            if task_name in self.tasks:
                raise ValueError(f"name={task_name!r}: a task is already registered as this")
            task = Task(
                app=self,
                fn=f,
                name=task_name,
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                timeout=timeout,
                retry=retry or RetryPolicy(),
                permanent=permanent,
                visibility_timeout=visibility_timeout,
                breaker=breaker,
                keep_result=keep_result,
                version=version,
                upcast=dict(upcast) if upcast is not None else {},
            )
            self.tasks[task_name] = task
            return task

        return register(fn) if fn is not None else register

    def schedule(
        self,
        task: Task[Any, Any],
        cron: str,
        *,
        name: str | None = None,
        tz: str | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        missed: MissedPolicy = "latest",
        max_delay: float = DEFAULT_MAX_DELAY_S,
        max_catchup: int = DEFAULT_MAX_CATCHUP,
        queue: str | None = None,
        priority: int | None = None,
        overlap: bool = True,
    ) -> Schedule:
        """Run ``task`` on a cron schedule (see ``skiplock._cron`` for syntax and DST rule).

        ``missed`` says what happens to slots that passed while no scheduler ran: ``skip``
        them, run the ``latest`` one if it is at most ``max_delay`` seconds old (the default,
        10 minutes), or run ``all`` of them (the most recent ``max_catchup``).
        """
        if not isinstance(task, Task):
            raise ConfigurationError(
                f"schedule {cron!r}: expected a skiplock Task; put @app.periodic above @app.task"
            )
        schedule = build_schedule(
            task,
            cron,
            name=name,
            tz=tz or self.timezone,
            args=args,
            kwargs=kwargs,
            missed=missed,
            max_delay=max_delay,
            max_catchup=max_catchup,
            queue=queue,
            priority=priority,
            overlap=overlap,
        )
        if schedule.id in self.schedules:
            raise ConfigurationError(
                f"name={schedule.id!r}: a schedule already has this name; pass name= to tell "
                "two schedules of one task apart"
            )
        self.schedules[schedule.id] = schedule
        return schedule

    def periodic(
        self,
        cron: str,
        *,
        name: str | None = None,
        tz: str | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        missed: MissedPolicy = "latest",
        max_delay: float = DEFAULT_MAX_DELAY_S,
        max_catchup: int = DEFAULT_MAX_CATCHUP,
        queue: str | None = None,
        priority: int | None = None,
        overlap: bool = True,
    ) -> Callable[[Task[P, R]], Task[P, R]]:
        """Decorator form of ``schedule``, stacked above ``@app.task``; returns the task."""

        def register(task: Task[P, R]) -> Task[P, R]:
            self.schedule(
                task,
                cron,
                name=name,
                tz=tz,
                args=args,
                kwargs=kwargs,
                missed=missed,
                max_delay=max_delay,
                max_catchup=max_catchup,
                queue=queue,
                priority=priority,
                overlap=overlap,
            )
            return task

        return register

    def get_task(self, name: str) -> Task[Any, Any]:
        try:
            return self.tasks[name]
        except KeyError:
            raise UnknownTask(f"no task is registered as {name!r}") from None

    # -- the database -------------------------------------------------------------------------

    def new_backend(self) -> Backend:
        """A fresh, unopened backend for this app's URL."""
        return open_backend(self.url, clock=self.clock)

    async def backend(self) -> Backend:
        """The open backend for the running event loop (one per loop: pools are per loop)."""
        loop = asyncio.get_running_loop()
        backend = self._backends.get(loop)
        if backend is not None:
            return backend
        # Callers racing to open it (a producer's first gather, say) must share one backend,
        # not each open a pool of which only the last is kept and the rest leak.
        opening = self._opening.setdefault(loop, asyncio.Lock())
        async with opening:
            backend = self._backends.get(loop)
            if backend is None:
                backend = self.new_backend()
                await backend.open()  # cached only once open, so a failed open is retried
                try:
                    await self._refuse_newer_schema(backend)
                except SchemaError:
                    await backend.close()
                    raise
                self._backends[loop] = backend
        return backend

    async def _refuse_newer_schema(self, backend: Backend) -> None:
        """Refuse a schema a newer skiplock wrote, once per opened backend (one query): this
        skiplock's statements could silently write rows the newer one misreads."""
        current, latest = await backend.schema_version()
        if current > latest:
            raise SchemaError(
                f"the database at {mask_url(self.url)} has skiplock schema version {current}, "
                f"newer than this skiplock's {latest}: upgrade skiplock"
            )

    async def close(self) -> None:
        """Close this loop's backend (a worker or script calls this on the way out)."""
        await self._close_waiters()
        backend = self._backends.pop(asyncio.get_running_loop(), None)
        if backend is not None:
            await backend.close()

    async def migrate(self) -> list[int]:
        """Create or upgrade skiplock's tables; returns the migration versions applied.

        SchemaError, naming both versions, if a newer skiplock already migrated the database
        (``backend()`` refuses it before anything is written)."""
        return await (await self.backend()).migrate()

    async def wait_for_database(self, stopping: asyncio.Event | None = None) -> bool:
        """Until the database answers with a current schema: unreachable is retried with
        capped, jittered backoff (a worker started during a database restart waits for it);
        an outdated schema raises SchemaError at once. False if ``stopping`` was set first."""
        failures = 0
        while stopping is None or not stopping.is_set():
            try:
                return await _unless_set(stopping, self.check_schema())
            except BackendUnavailable as exc:
                failures += 1
                delay = random.uniform(0, min(30.0, 0.5 * 2**failures))
                log.warning("database unavailable (%s); retrying in %.1fs", exc, delay)
                if stopping is None:
                    await asyncio.sleep(delay)
                else:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay):
                            await stopping.wait()
        return False

    async def check_schema(self) -> None:
        """Raise SchemaError, saying what to run, unless the schema is exactly current."""
        current, latest = await (await self.backend()).schema_version()
        if current < latest:
            raise SchemaError(
                f"the database at {mask_url(self.url)} has skiplock schema version {current}, "
                f"this skiplock needs {latest}: run `skiplock migrate APP` first"
            )
        if current > latest:
            raise SchemaError(
                f"the database schema (version {current}) is newer than this skiplock "
                f"(version {latest}): upgrade skiplock"
            )

    # -- enqueueing ---------------------------------------------------------------------------

    async def enqueue_many(
        self, jobs: Iterable[NewJob], *, connection: object | None = None
    ) -> list[JobHandle]:
        """Insert many prepared jobs (``task.prepare(...)``): all of them or none (QueueFull,
        DuplicateJob and database errors leave nothing behind), however many there are.

        With ``connection``, every row joins the caller's transaction (asyncpg, psycopg async
        or sqlite3 connection, or a SQLAlchemy session or connection on one of them) and
        workers are woken when it commits: by its NOTIFY or the file's data_version, never
        in-process (that would fire before the commit, when a woken worker finds nothing and
        goes back to sleep).
        """
        batch = list(jobs)
        if self.eager:
            return await run_eager(self, batch)
        backend = await self.backend()
        with self._traced(batch) as inserted:
            if _sqlalchemy.is_sqlalchemy(connection):
                ids = await _sqlalchemy.insert_many(backend, batch, connection)
            else:
                ids = await backend.job_insert_many(JobInsertManyParams(batch, connection))
            inserted(ids)
        if connection is None:
            self._wake_local(batch)
        return self._handles(batch, ids)

    def enqueue_many_sync(
        self, jobs: Iterable[NewJob], *, connection: object | None = None
    ) -> list[JobHandle]:
        """``enqueue_many`` without an event loop; ``connection`` may be sqlite3 or psycopg, or a
        SQLAlchemy Session or Connection on one of them."""
        batch = list(jobs)
        if connection is None or self.eager:
            return self._run_sync(self.enqueue_many(batch))
        if _sqlalchemy.is_sqlalchemy(connection):
            connection = _sqlalchemy.driver_connection_sync(connection)
        if asyncio.iscoroutinefunction(getattr(connection, "execute", None)):
            raise TypeError("connection: an async connection needs `await task.aenqueue(...)`")
        with self._traced(batch) as inserted:
            params = JobInsertManyParams(batch, connection)
            ids = self.new_backend().job_insert_many_sync(params)
            inserted(ids)
        return self._handles(batch, ids)  # woken at commit, not here (see enqueue_many)

    def _traced(
        self, batch: Sequence[NewJob]
    ) -> contextlib.AbstractContextManager[Callable[[Sequence[int]], None]]:
        """The enqueue's span if the app is traced (its context stored on each job)."""
        if self.tracing is None or not batch:
            return contextlib.nullcontext(_ignore_ids)
        return self.tracing.enqueue(batch)

    def _handles(self, batch: Sequence[NewJob], ids: Sequence[int]) -> list[JobHandle]:
        return [JobHandle(i, j.task, j.queue, self) for i, j in zip(ids, batch, strict=True)]

    # -- in-process wake-ups ------------------------------------------------------------------

    def add_waker(self, waker: Callable[[str], None]) -> Callable[[], None]:
        """Call ``waker(queue)`` after this process commits an enqueue of its own (not one on
        a caller's connection: see enqueue_many); returns the unsubscribe."""
        self._wakers.add(waker)
        return lambda: self._wakers.discard(waker)

    def _wake_local(self, batch: Sequence[NewJob]) -> None:
        self._wake_queues({job.queue for job in batch})

    def _wake_queues(self, queues: Iterable[str]) -> None:
        for queue in queues:
            for waker in list(self._wakers):
                waker(queue)

    # -- the sync bridge ----------------------------------------------------------------------

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run on the app's private loop thread: one loop (and pool) for all sync callers."""
        with self._sync_lock:
            if self._sync_loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="skiplock-sync", daemon=True).start()
                self._sync_loop = loop
        return asyncio.run_coroutine_threadsafe(coro, self._sync_loop).result()
