"""``App``: the task registry, the configuration, and the way in to the database."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import os
import random
import socket
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, TypeVar, overload

from ._backends import Backend, open_backend
from ._backends.base import Clock
from ._config import DEFAULT_MAX_ATTEMPTS, Breaker, RetryPolicy, require
from ._cron import zone
from ._job import JobFilter, JobRecord, JobState, NewJob, QueueInfo, TaskPause
from ._payload import DEFAULT_MAX_PAYLOAD_BYTES
from ._schedule import (
    DEFAULT_MAX_CATCHUP,
    DEFAULT_MAX_DELAY_S,
    MissedPolicy,
    Schedule,
    build_schedule,
)
from ._task import JobHandle, Task
from .errors import (
    BackendUnavailable,
    ConfigurationError,
    DuplicateJob,
    SchemaError,
    UnknownTask,
)

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

log = logging.getLogger("skiplock")

DEFAULT_URL = "sqlite:///skiplock.db"
ENQUEUE_BATCH = 5000
"""Rows per round trip in ``enqueue_many``: large enough to amortise, small enough to stay
well under PostgreSQL's parameter and message limits."""


def default_who() -> str:
    """Who a person's action is recorded as when they do not say: user@host."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


class App:
    """Tasks, configuration and database access for one skiplock deployment.

    ``App()`` reads ``SKIPLOCK_DATABASE_URL`` and falls back to ``sqlite:///skiplock.db``.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        clock: Clock | None = None,
        timezone: str = "UTC",
    ) -> None:
        self.url = url or os.environ.get("SKIPLOCK_DATABASE_URL") or DEFAULT_URL
        require(max_payload_bytes > 0, "max_payload_bytes", max_payload_bytes, "must be > 0")
        self.max_payload_bytes = max_payload_bytes
        self.clock = clock
        self.timezone = zone(timezone).key
        """The default zone of schedules that name none."""
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.schedules: dict[str, Schedule] = {}
        open_backend(self.url)  # validate the URL now, not at first use
        self._backends: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Backend] = (
            weakref.WeakKeyDictionary()
        )
        self._wakers: set[Callable[[str], None]] = set()
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        self._sync_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"App({self.url!r}, tasks={len(self.tasks)})"

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
    ) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
        """Register a function (async or sync) as a task; usable bare or with options."""

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
        if backend is None:
            backend = self.new_backend()
            await backend.open()  # cached only once open, so a failed open is retried
            self._backends[loop] = backend
        return backend

    async def close(self) -> None:
        """Close this loop's backend (a worker or script calls this on the way out)."""
        backend = self._backends.pop(asyncio.get_running_loop(), None)
        if backend is not None:
            await backend.close()

    async def migrate(self) -> list[int]:
        """Create or upgrade skiplock's tables; returns the migration versions applied."""
        return await (await self.backend()).migrate()

    async def wait_for_database(self, stopping: asyncio.Event | None = None) -> bool:
        """Until the database answers with a current schema: unreachable is retried with
        capped, jittered backoff (a worker started during a database restart waits for it);
        an outdated schema raises SchemaError at once. False if ``stopping`` was set first."""
        failures = 0
        while stopping is None or not stopping.is_set():
            try:
                await self.check_schema()
                return True
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
                f"the database at {self.url} has skiplock schema version {current}, "
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
        """Insert many prepared jobs (``task.prepare(...)``), one round trip per batch.

        With ``connection``, every row joins the caller's transaction (asyncpg, psycopg async
        or sqlite3 connection) and workers are woken when it commits.
        """
        batch = list(jobs)
        backend = await self.backend()
        ids: list[int] = []
        for start in range(0, len(batch), ENQUEUE_BATCH):
            chunk = batch[start : start + ENQUEUE_BATCH]
            ids += await backend.job_insert_many(chunk, connection)
        self._wake_local(batch)
        return self._handles(batch, ids)

    def enqueue_many_sync(
        self, jobs: Iterable[NewJob], *, connection: object | None = None
    ) -> list[JobHandle]:
        """``enqueue_many`` without an event loop; ``connection`` may be sqlite3 or psycopg."""
        batch = list(jobs)
        if connection is None:
            return self._run_sync(self.enqueue_many(batch))
        if asyncio.iscoroutinefunction(getattr(connection, "execute", None)):
            raise TypeError("connection: an async connection needs `await task.aenqueue(...)`")
        ids = self.new_backend().job_insert_many_sync(batch, connection)
        self._wake_local(batch)
        return self._handles(batch, ids)

    async def get_job(self, job_id: int) -> JobRecord:
        """One job row, or JobNotFound."""
        return await (await self.backend()).job_get(job_id)

    async def retry_job(self, job_id: int, *, who: str = "") -> bool:
        """Requeue a finished (usually dead) job with its attempts reset; recorded on the job.

        DuplicateJob if a live job now holds the job's unique key (it stays as it was)."""
        try:
            done = await (await self.backend()).job_retry(job_id, who or default_who())
        except DuplicateJob as exc:
            raise DuplicateJob(
                f"job {job_id} was not retried: a live job holds its unique key"
            ) from exc
        if done:
            job = await self.get_job(job_id)
            self._wake_queues([job.queue])
        return done

    async def cancel_job(self, job_id: int, *, who: str = "") -> JobState:
        """Cancel a job: a pending one never runs; a running one is cancelled by its worker
        within about a second (final state ``cancelled``). Returns the state after."""
        return await (await self.backend()).job_cancel(job_id, who or default_who())

    async def list_jobs(
        self, state: JobState | None = None, where: JobFilter | None = None
    ) -> list[JobRecord]:
        """Jobs in a state (any if None) matching a filter, newest first."""
        return await (await self.backend()).job_list(state, where or JobFilter())

    async def requeue_dead(self, where: JobFilter, *, who: str = "") -> list[int]:
        """Dead jobs matching ``where`` back to pending with attempts reset; their ids.

        A dead job whose unique key a live job now holds stays dead (not in the ids)."""
        ids = await (await self.backend()).job_requeue_dead(where, who or default_who())
        if ids:
            self._wake_queues([where.queue] if where.queue else ["*"])
        return ids

    async def discard_dead(self, where: JobFilter, *, who: str = "") -> list[int]:
        """Dead jobs matching ``where`` to ``cancelled`` (kept until retention); their ids."""
        return await (await self.backend()).job_discard_dead(where, who or default_who())

    async def counts(self, queue: str | None = None) -> dict[str, int]:
        """How many jobs are in each state."""
        return await (await self.backend()).job_count_by_state(queue)

    # -- queue and task controls (stored in the database: every producer and worker agrees) --

    async def _known_queue(self, queue: str) -> str:
        known = {t.queue for t in self.tasks.values()}
        known |= {s.queue for s in self.schedules.values() if s.queue}
        known |= {q.name for q in await self.queues()}
        if queue not in known:
            raise ConfigurationError(
                f"unknown queue {queue!r}: no task uses it and it has no jobs or settings "
                f"(known: {', '.join(sorted(known)) or 'none'})"
            )
        return queue

    async def queues(self) -> list[QueueInfo]:
        """Every queue with settings or live jobs, with its settings and live counts."""
        return await (await self.backend()).queue_list()

    async def pause_queue(self, queue: str) -> None:
        """Workers stop claiming from ``queue`` within one poll interval; running jobs finish."""
        await (await self.backend()).queue_set_paused(await self._known_queue(queue), True)

    async def resume_queue(self, queue: str) -> None:
        await (await self.backend()).queue_set_paused(await self._known_queue(queue), False)
        self._wake_queues([queue])

    async def set_queue_limits(
        self,
        queue: str,
        *,
        max_depth: int | None = None,
        max_running: int | None = None,
        rate_per_s: float | None = None,
    ) -> None:
        """Bound a queue (``max_depth``: enqueue raises QueueFull past it) and limit it across
        every worker (``max_running`` at once, ``rate_per_s`` starts a second). None lifts."""
        require(max_depth is None or max_depth >= 0, "max_depth", max_depth, "must be >= 0")
        require(max_running is None or max_running >= 0, "max_running", max_running, ">= 0")
        require(rate_per_s is None or rate_per_s > 0, "rate_per_s", rate_per_s, "must be > 0")
        await (await self.backend()).queue_set_limits(
            await self._known_queue(queue), max_depth, max_running, rate_per_s
        )

    async def pause_task(self, task: str, *, for_s: float | None = None, reason: str = "") -> None:
        """Stop every worker claiming jobs of ``task`` (until resumed, or for ``for_s``)."""
        self.get_task(task)
        until = None if for_s is None else datetime.now(UTC) + timedelta(seconds=for_s)
        await (await self.backend()).task_pause(task, until, reason or f"paused by {default_who()}")

    async def resume_task(self, task: str) -> bool:
        """Lift a task's pause (a person's or the breaker's); False if it was not paused."""
        self.get_task(task)
        resumed = await (await self.backend()).task_resume(task)
        self._wake_queues([self.tasks[task].queue])
        return resumed

    async def task_pauses(self) -> list[TaskPause]:
        return await (await self.backend()).task_pauses()

    def _handles(self, batch: Sequence[NewJob], ids: Sequence[int]) -> list[JobHandle]:
        return [JobHandle(i, j.task, j.queue, self) for i, j in zip(ids, batch, strict=True)]

    # -- in-process wake-ups ------------------------------------------------------------------

    def add_waker(self, waker: Callable[[str], None]) -> Callable[[], None]:
        """Call ``waker(queue)`` after this process enqueues; returns the unsubscribe."""
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
