"""``App``: the public facade of one skiplock deployment.

It declares tasks and schedules into a ``Registry`` (what a worker needs to run them), keeps
one open backend per event loop, and composes named parts over that backend, each kept in a
module of its own: the enqueue and wake path (``_enqueue.Enqueuer``), the operations a person
runs (``_app_control.Operations``), the health reads (``_app_observe.Observe``) and the result
reads (``_app_results.Results``). Its public methods are one-line delegations carrying the
documentation; the parts never see the App, and the App imports no worker (``drain`` is
``skiplock.testing``'s burst worker).
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal, ParamSpec, TypeVar, overload

from . import _schema
from ._app_control import KEPT, Kept, Operations
from ._app_databases import Databases
from ._app_observe import DEFAULT_KEYS_SHOWN, DEFAULT_WINDOW_S, Observe
from ._app_results import Results
from ._app_workflows import MAX_GRAPH_JOBS, WorkflowOps
from ._backends import Backend, open_backend
from ._backends.protocol import Clock
from ._backends.workflow_plan import Plan
from ._batch import Batch
from ._config import DEFAULT_MAX_ATTEMPTS, Breaker, RetryPolicy, require
from ._eager import EagerMode
from ._enqueue import Enqueuer
from ._job import (
    AuditEntry,
    BlockedKey,
    CronRun,
    DeadGroup,
    JobFilter,
    JobOutcome,
    JobRecord,
    JobState,
    KeyLoad,
    NewJob,
    QueueInfo,
    SchemaVersion,
    TaskPause,
    WorkerInfo,
)
from ._job_log import DEFAULT_JOB_LOG_BYTES, JobLog
from ._lanes import DEFAULT, Database, Directory, Split
from ._limits import DEFAULT_MAX_SIGNALS_KEPT, MAX_INT, MAX_PARENTS, check_int
from ._observe.stats import Stats
from ._payload import DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_MAX_RESULT_BYTES
from ._registry import Registry
from ._schedule import (
    DEFAULT_MAX_CATCHUP,
    DEFAULT_MAX_DELAY_S,
    MissedPolicy,
    Schedule,
    build_schedule,
)
from ._task import JobHandle, Task
from ._task_options import Upcast, declared
from ._tracing import Tracing
from ._url import mask_in, mask_url
from ._workflow import Signature
from ._workflow_records import (
    BatchInfo,
    JobLinks,
    LinkedJob,
    SignalReceipt,
    WaitingJob,
    WorkflowGraph,
)
from .errors import ConfigurationError, SchemaError

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

DEFAULT_URL = "sqlite:///skiplock.db"

POOL_BUDGET = 10
"""PostgreSQL's main pool of one database; an App over several divides it between them (at
least 2 each), so adding a database does not multiply a process's connections."""


def _database_url(url: str | None) -> str:
    """The URL given, else ``SKIPLOCK_DATABASE_URL``, else the default file. An empty one is
    a mistake (``--url "$DATABASE_URL"`` with the variable unset), never the default."""
    if url is not None:
        if not url.strip():
            raise ConfigurationError(
                "url is empty: name the database (sqlite:///path or postgresql://...); "
                "a variable that is unset expands to nothing"
            )
        return url
    env = os.environ.get("SKIPLOCK_DATABASE_URL")
    if env is not None and not env.strip():
        raise ConfigurationError(
            "SKIPLOCK_DATABASE_URL is set but empty: set it to a database URL, or unset it "
            f"for the default {DEFAULT_URL}"
        )
    return env or DEFAULT_URL


class App:
    """Tasks, configuration and database access for one skiplock deployment.

    ``App()`` reads ``SKIPLOCK_DATABASE_URL`` and falls back to ``sqlite:///skiplock.db``.
    ``max_signals_kept``: the signals one job keeps that no ``wait_for`` took yet (2,000;
    past it ``signal`` raises MailboxFull).

    Several PostgreSQL databases (docs/scaling.md): ``databases`` names the others
    (``{"b": Database(url, number=1)}``; ``url`` is ``"default"``, number 0), ``lanes`` puts
    each lane on one of them (``{"eu": "b"}``), ``routes`` sends a queue's jobs to a lane or
    a ``Split`` of lanes by key (``{"email": "eu"}``), and ``draining`` names the database a
    moved lane is still drained from. ``migrate`` migrates and numbers each database; a job id
    names the database it was made in (``app.directory.name_of_id``).

    ``job_log=True``: every task that says nothing of it keeps its jobs' own logs, each
    attempt's tail within ``job_log_bytes`` (docs/guides/job-logs.md).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        max_signals_kept: int = DEFAULT_MAX_SIGNALS_KEPT,
        clock: Clock | None = None,
        timezone: str = "UTC",
        eager: bool = False,
        databases: Mapping[str, Database] | None = None,
        lanes: Mapping[str, str] | None = None,
        routes: Mapping[str, str | Split] | None = None,
        draining: Mapping[str, str] | None = None,
        job_log: bool = False,
        job_log_bytes: int = DEFAULT_JOB_LOG_BYTES,
    ) -> None:
        self.url = _database_url(url)
        self.directory = Directory(
            dict(databases or {}), dict(lanes or {}), dict(routes or {}), dict(draining or {})
        )
        """Which database each lane lives in, and each queue's lane (``skiplock._lanes``)."""
        require(isinstance(eager, bool), "eager", eager, "must be a bool")
        require(max_payload_bytes > 0, "max_payload_bytes", max_payload_bytes, "must be > 0")
        check_int("max_signals_kept", max_signals_kept, 1, MAX_INT)
        self.max_payload_bytes = max_payload_bytes
        """The largest arguments a job may carry, in bytes of JSON (a plain attribute:
        ``Task.prepare`` reads it on every enqueue)."""
        self.registry = Registry(
            max_result_bytes=max_result_bytes,
            clock=clock,
            timezone=timezone,
            job_log=job_log,
            job_log_bytes=job_log_bytes,
        )
        """What a worker needs to run this app's jobs (``Worker(app.registry, backend)``)."""
        self._check_url()
        self._backends: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Backend]] = (
            weakref.WeakKeyDictionary()
        )
        self._opening: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._eager = EagerMode(eager)
        self._enqueuer = Enqueuer(
            self.registry,
            self.backend,
            self.new_backend,
            self._eager,
            self,
            lambda: self.url,
            self.directory,
            self._backend_of,
            self.new_backend,
        )
        reach = Databases(self._backend_of, self.directory)
        self._operations = Operations(reach, self.registry)
        self._workflows = WorkflowOps(
            reach, max_payload_bytes, self._operations._audit, max_signals_kept
        )
        self._observe = Observe(reach)
        self._results = Results(reach, self._eager, self)
        self.registry.on_finished(self._results.note_finished)
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        self._sync_lock = threading.Lock()

    # -- what the registry holds, read and set through the App as before -----------------------

    @property
    def tasks(self) -> dict[str, Task[Any, Any]]:
        """The registered tasks by name."""
        return self.registry.tasks

    @tasks.setter
    def tasks(self, tasks: dict[str, Task[Any, Any]]) -> None:
        self.registry.tasks = tasks

    @property
    def schedules(self) -> dict[str, Schedule]:
        """The cron schedules by name."""
        return self.registry.schedules

    @property
    def tracing(self) -> Tracing | None:
        """Span hooks (``skiplock.otel.instrument(app)``); None: untraced, free."""
        return self.registry.tracing

    @tracing.setter
    def tracing(self, tracing: Tracing | None) -> None:
        self.registry.tracing = tracing

    @property
    def clock(self) -> Clock | None:
        """A replacement for the database's now() (tests that pin time); None: the real one."""
        return self.registry.clock

    @property
    def max_result_bytes(self) -> int:
        """The largest return value a job may store, in bytes of JSON (default 256 KiB)."""
        return self.registry.max_result_bytes

    @property
    def timezone(self) -> str:
        """The default zone of schedules that name none."""
        return self.registry.timezone

    @property
    def eager(self) -> bool:
        """Run each task at enqueue, in the caller's loop, with no database (unit tests)."""
        return self._eager.on

    @eager.setter
    def eager(self, on: bool) -> None:
        self._eager.on = on

    @property
    def eager_outcomes(self) -> dict[int, JobOutcome]:
        """The outcomes of the jobs eager mode ran, by id."""
        return self._eager.outcomes

    def _check_url(self) -> None:
        """Validate the URLs now, not at first use; the error shows each with the password
        masked, and without the unmasked original chained to it."""
        for database in self.directory.names():
            url = self.url_of(database)
            try:
                open_backend(url)
            except ConfigurationError as exc:
                raise ConfigurationError(mask_in(str(exc), url)) from None
        if self.directory.several and not self.url.startswith(("postgresql://", "postgres://")):
            raise ConfigurationError(
                f"databases=: several databases are PostgreSQL's, and url is "
                f"{mask_url(self.url)!r} (SQLite serves one machine: leave databases= out)"
            )

    def url_of(self, database: str = DEFAULT) -> str:
        """The URL of a database of the directory (``"default"``: the App's own)."""
        if database == DEFAULT:
            return self.url
        found = self.directory.databases.get(database)
        if found is None:
            raise ConfigurationError(
                f"database {database!r}: not in this App's databases= (known: "
                f"{', '.join(self.directory.names())})"
            )
        return found.url

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
        concurrency_key: str | Callable[..., str] | None = None,
        key_limit: int | None = None,
        ordering_key: str | Callable[..., str] | None = None,
        ordering_on_dead: Literal["block", "skip"] = "block",
        unique_key: str | Callable[..., str] | None = None,
        on_conflict: Literal["keep", "replace", "reject"] = "keep",
        unique_while: Literal["live", "live_or_succeeded"] = "live",
        unique_scope: Literal["task", "shared"] = "task",
        unique_for: float | timedelta | None = None,
        debounce: float | timedelta | None = None,
        key_weight: int | None = None,
        fair: bool = True,
        lane: str | None = None,
        executor: Literal["thread", "process"] | None = None,
        job_log: bool | None = None,
        job_log_bytes: int | None = None,
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
        concurrency_key: str | Callable[..., str] | None = None,
        key_limit: int | None = None,
        ordering_key: str | Callable[..., str] | None = None,
        ordering_on_dead: Literal["block", "skip"] = "block",
        unique_key: str | Callable[..., str] | None = None,
        on_conflict: Literal["keep", "replace", "reject"] = "keep",
        unique_while: Literal["live", "live_or_succeeded"] = "live",
        unique_scope: Literal["task", "shared"] = "task",
        unique_for: float | timedelta | None = None,
        debounce: float | timedelta | None = None,
        key_weight: int | None = None,
        fair: bool = True,
        lane: str | None = None,
        executor: Literal["thread", "process"] | None = None,
        job_log: bool | None = None,
        job_log_bytes: int | None = None,
    ) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
        """Register a function (async or sync) as a task; usable bare or with options.

        ``version`` is its payload version (stored on each job it enqueues) and ``upcast``
        maps each older version to a function bringing such a payload one version up:
        ``upcast={1: v1_to_v2}``, each ``fn(args, kwargs) -> (args, kwargs)``.

        ``concurrency_key`` (a string, or a function of the call's arguments giving one) and
        ``key_limit``: at most ``key_limit`` jobs with one key run at once, on every worker,
        and claims take from keys in turn; ``ordering_key``: one key's jobs one at a time in
        enqueue order, a dead one blocking the key (``ordering_on_dead="block"``) until a
        person acts, or skipped (``"skip"``); ``key_weight``: how many jobs a key takes each
        turn, ``fair=False``: no turns for the key (docs/guides/keys.md).

        ``unique_key`` (a string or a function of the arguments), ``on_conflict``,
        ``unique_while``, ``unique_for`` and ``debounce``: what an enqueue does while another
        job holds its key, a job of this task (``unique_scope="task"``, the default) or of
        any task sharing the key space (``"shared"``) (docs/concepts/delivery.md, "Unique
        jobs")."""

        given = dict(locals())  # the parameters by name: the record says which are options

        def register(f: Callable[P, R]) -> Task[P, R]:
            options = declared(given)  # per task: each gets its own ``upcast`` dict
            name = options["name"] or f"{f.__module__}.{f.__qualname__}"
            task = Task(app=self, fn=f, **{**options, "name": name})
            if task.lane is not None:
                self.directory.check_lane(f"task {name!r}: lane", task.lane)
            self.registry.add_task(task)
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
        self.registry.add_schedule(schedule)
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
        """The task registered as ``name``, or UnknownTask."""
        return self.registry.get_task(name)

    # -- the database -------------------------------------------------------------------------

    def new_backend(self, database: str = DEFAULT) -> Backend:
        """A fresh, unopened backend for one of this app's databases (its workflow releases
        bound by this app's ``max_payload_bytes``)."""
        several = self.directory.several
        share = max(2, POOL_BUDGET // len(self.directory.names())) if several else None
        backend = open_backend(self.url_of(database), clock=self.clock, pool_size=share)
        backend.max_payload_bytes = self.max_payload_bytes
        # Every lane living here, one database or several: an App of one database may still
        # split its queues into lanes (``lanes=``, ``routes=``), and its worker claims them all.
        backend.lanes = self.directory.lanes_served(database)
        return backend

    async def backend(self, *, create: bool = False, database: str = DEFAULT) -> Backend:
        """The open backend of ``database`` for the running event loop (one per loop and
        database: pools are per loop).

        ``create``: opening it may make a missing SQLite file (``migrate`` does; anything else
        on a missing file raises SchemaError rather than leave an empty database behind).
        With several databases, each is checked once to be the number the directory says
        (its ids would otherwise name another database)."""
        loop = asyncio.get_running_loop()
        here = self._backends.get(loop)
        backend = here.get(database) if here is not None else None
        if backend is not None:
            return backend
        url = self.url_of(database)
        # Callers racing to open it (a producer's first gather, say) must share one backend,
        # not each open a pool of which only the last is kept and the rest leak.
        opening = self._opening.setdefault(loop, asyncio.Lock())
        async with opening:
            here = self._backends.setdefault(loop, {})
            backend = here.get(database)
            if backend is None:
                backend = self.new_backend(database)
                await backend.open(create=create)  # cached only once open: a failure retries
                try:
                    await _schema.refuse_newer(backend, url)
                    if self.directory.several and not create:
                        await self._check_number(backend, database)
                except (SchemaError, ConfigurationError):
                    await backend.close()
                    raise
                here[database] = backend
        return backend

    async def _backend_of(self, database: str) -> Backend:
        """``backend(database=...)`` as the App's parts reach it (``Databases``, the
        enqueuer)."""
        return await self.backend(database=database)

    async def _check_number(self, backend: Backend, database: str) -> None:
        """Refuse a database whose recorded number is not the directory's (ids would name the
        wrong database); record it on a database that has none yet."""
        want = self.directory.number_of(database)
        got = await backend.database_number(want)
        if got != want:
            raise ConfigurationError(
                f"database {database!r} ({mask_url(self.url_of(database))}) is number {got}, "
                f"and databases= says {want}: its job ids start from its number, so it keeps "
                "it; give it its own number back, or name another database"
            )

    async def close(self) -> None:
        """Close this loop's backends (a worker or script calls this on the way out), and the
        connection sync enqueues on SQLite write through (the next one opens it again)."""
        await self._results.close()
        self._enqueuer.close_here()
        here = self._backends.pop(asyncio.get_running_loop(), None) or {}
        for backend in here.values():
            await backend.close()

    async def migrate(self) -> list[int]:
        """Create or upgrade skiplock's tables in every database of the App; returns the
        migration versions applied (to the App's own database: the others get the same).

        SchemaError, naming both versions, if a newer skiplock already migrated a database
        (``backend()`` refuses it before anything is written). Each PostgreSQL database is
        given its number (``databases=``), from which its job ids count."""
        applied: list[int] = []
        for database in self.directory.names():
            backend = await self.backend(create=True, database=database)
            done = await backend.migrate()
            applied = done if database == DEFAULT else applied
            if self.url.startswith(("postgresql://", "postgres://")):
                await self._check_number(backend, database)
        return applied

    async def wait_for_database(
        self, stopping: asyncio.Event | None = None, *, database: str = DEFAULT
    ) -> bool:
        """Until ``database`` answers with a current schema: unreachable is retried with
        capped, jittered backoff (a worker started during a database restart waits for it);
        an outdated schema raises SchemaError at once. False if ``stopping`` was set first."""
        self.url_of(database)  # an unknown name is a ConfigurationError, never a retry

        async def check() -> None:
            await _schema.check_current(
                await self.backend(database=database), self.url_of(database)
            )

        return await _schema.wait_until_current(check, stopping)

    def lane_for(self, queue: str, task_lane: str | None, key: str | None) -> str:
        """The lane of a job (``skiplock._lanes``' rule): the task's own, else its queue's
        route (a Split picks by ``key``), else ``"default"``."""
        return self.directory.lane_for(queue, task_lane, key)

    def owner_of(self, schedule: Schedule) -> str:
        """The database a schedule's slots are claimed and enqueued in: its jobs' (each slot
        runs once across every database, claimed in that database's cron ledger alone)."""
        queue = schedule.queue or schedule.task.queue
        return self.directory.database_of(self.directory.lane_for(queue, schedule.task.lane))

    async def schema_version(self) -> SchemaVersion:
        """The database's skiplock schema version and this skiplock's, in one cheap query (a
        readiness probe's: ready when they are equal). A schema a newer skiplock wrote
        raises SchemaError naming both, as every other call does."""
        current, latest = await (await self.backend()).schema_version()
        return SchemaVersion(current, latest)

    async def check_schema(self) -> None:
        """Raise SchemaError, saying what to run, unless the schema is exactly current."""
        await _schema.check_current(await self.backend(), self.url)

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
        return await self._enqueuer.enqueue_many(jobs, connection=connection)

    def enqueue_many_sync(
        self, jobs: Iterable[NewJob], *, connection: object | None = None
    ) -> list[JobHandle]:
        """``enqueue_many`` without an event loop; ``connection`` may be sqlite3 or psycopg, or a
        SQLAlchemy Session or Connection on one of them."""
        return self._enqueuer.enqueue_many_sync(
            jobs, connection=connection, run_sync=self._run_sync
        )

    async def enqueue_plan(
        self, plan: Plan, *, connection: object | None = None
    ) -> list[JobHandle]:
        """Write a compiled workflow (``skiplock.chain(...)`` and the rest call this)."""
        return await self._enqueuer.enqueue_plan(plan, connection=connection)

    def enqueue_plan_sync(self, plan: Plan, *, connection: object | None = None) -> list[JobHandle]:
        """``enqueue_plan`` without an event loop."""
        return self._enqueuer.enqueue_plan_sync(
            plan, connection=connection, run_sync=self._run_sync
        )

    # -- workflows: batches, signals, links ----------------------------------------------------

    def batch(
        self,
        *,
        on_success: Signature | None = None,
        on_complete: Signature | None = None,
        id: int | None = None,
        close: bool | None = None,
        database: str | None = None,
    ) -> Batch:
        """A batch: ``async with app.batch(on_success=report.s()) as batch:`` (or ``with``);
        every job enqueued in the block joins it. ``on_success`` runs once every member
        succeeded (a member that dies or is cancelled cancels it), ``on_complete`` once every
        member finished, either way; each exactly once, with the batch's id first.

        A new batch is closed at the block's end (``close=False`` leaves it open);
        ``app.batch(id=...)`` adds more to an open one and leaves it open (``close=True``
        closes it at the block's end, ``app.close_batch(id)`` at any time). A block that
        raises aborts the batch, like a transaction: neither callback runs, its members that
        have not started are cancelled, those running finish, and the exception goes on.

        With several databases a batch lives in one: the one its callbacks' lanes are in
        (``database`` names it, and must be that one; with ``id=``, it says where the
        existing batch is: the App's own by default). Its members must go there too: one
        routed elsewhere is refused, nothing written."""
        if id is not None:
            check_int("id", id, 1, 2**63 - 1)
            if on_success is not None or on_complete is not None:
                raise ConfigurationError(
                    "app.batch(id=...): an existing batch keeps its callbacks; give id= alone"
                )
        if close is not None and not isinstance(close, bool):
            raise ConfigurationError(f"app.batch(close={close!r}): must be True or False")
        closes = close if close is not None else id is None
        return Batch(self, on_success, on_complete, id, closes, database)

    def batch_database(
        self, on_success: Signature | None, on_complete: Signature | None, database: str | None
    ) -> str:
        """The database a batch with these callbacks lives in (``app.batch``'s rule):
        ConfigurationError when they are in two, or not in the one ``database`` names."""
        return self._workflows.batch_database(on_success, on_complete, database)

    async def open_batch(
        self,
        on_success: Signature | None = None,
        on_complete: Signature | None = None,
        *,
        database: str | None = None,
    ) -> int:
        """Open a batch (what entering ``app.batch(...)`` does); its id (of the database its
        callbacks' lanes are in: ``batch_database``)."""
        return await self._workflows.open_batch(on_success, on_complete, database)

    async def close_batch(self, batch_id: int, *, database: str = DEFAULT) -> bool:
        """Close a batch (of ``database``): its callbacks run once every member finished (at
        once if they all have). False if it was closed already."""
        return await self._workflows.close_batch(batch_id, database=database)

    async def abort_batch(
        self, batch_id: int, reason: BaseException, *, database: str = DEFAULT
    ) -> bool:
        """Abort an open batch (what a block that raises does): it closes, neither callback
        runs, and its members that have not started are cancelled (``BatchAborted``, naming
        ``reason``); those running finish. False if it was closed already (nothing changes)."""
        return await self._workflows.abort_batch(batch_id, reason, database=database)

    async def batch_info(self, batch_id: int, *, database: str = DEFAULT) -> BatchInfo:
        """A batch's live counts: members per state, whether it is closed, its callbacks.

        A batch id is its database's own number, not a job id: ``app.batch()`` opens one in
        its callbacks' database, and its members are there too; ``database`` reads another's
        (a job's ``job_links(id).batch_id`` is of the job's database:
        ``app.directory.name_of_id(id)``)."""
        return await self._workflows.batch_info(batch_id, database=database)

    async def signal(
        self, job_id: int, name: str, payload: Any = None, *, who: str = ""
    ) -> SignalReceipt:
        """Send the signal ``name`` to a job, with ``payload`` (strict JSON) as what its
        ``wait_for(name)`` returns. A job's signals of a name are kept in the order they
        come, each taken by one ``wait_for``: a job parked on it runs again now
        (``DELIVERED``); otherwise it is kept for a later wait (``KEPT``; the receipt's
        ``waiting_for`` names the signal the job is parked on, if another); a finished job
        keeps nothing (``FINISHED``). ``who`` (default ``user@host``) is recorded as its
        sender (``wait_for(name, with_sender=True)`` returns it). A job that keeps
        ``max_signals_kept`` signals no wait took yet refuses more: MailboxFull, nothing
        written. Audited."""
        return await self._workflows.signal(job_id, name, payload, who=who)

    async def job_links(
        self, job_id: int, *, parents_limit: int = MAX_PARENTS, children_limit: int = 1000
    ) -> JobLinks:
        """A job's parents (the first ``parents_limit`` in order, and all of them counted
        by state: ``parent_counts``), children (the first ``children_limit`` by id), batch,
        and what it waits for."""
        return await self._workflows.job_links(job_id, children_limit, parents_limit)

    async def linked_jobs(
        self,
        job_id: int,
        side: Literal["parents", "children"],
        *,
        after: int | None = None,
        limit: int = 200,
    ) -> list[LinkedJob]:
        """A page of a job's parents or children by id: at most ``limit``, those after id
        ``after`` (None: from the first); pass the last id of one page for the next."""
        return await self._workflows.linked_jobs(job_id, side, after, limit)

    async def waiting_jobs(self, limit: int = 200) -> list[WaitingJob]:
        """Jobs in ``waiting``: on parents, or parked on a signal (and until when); of every
        database, by id (database by database), at most ``limit`` in all."""
        return await self._workflows.waiting_jobs(limit)

    async def workflow_graph(self, job_id: int, most: int = MAX_GRAPH_JOBS) -> WorkflowGraph:
        """The jobs linked to a job, up and down (at most ``most``), and their edges."""
        return await self._workflows.workflow_graph(job_id, most)

    # -- in-process wake-ups ------------------------------------------------------------------

    def add_waker(self, waker: Callable[[str], None]) -> Callable[[], None]:
        """Call ``waker(queue)`` after this process commits an enqueue of its own (not one on
        a caller's connection: see enqueue_many); returns the unsubscribe."""
        return self.registry.add_waker(waker)

    def _wake_queues(self, queues: Iterable[str]) -> None:
        self.registry.wake_queues(queues)

    def note_finished(self, job_ids: Iterable[int]) -> None:
        """A worker on this loop wrote these jobs' final outcomes: wake its waiters directly."""
        self.registry.note_finished(job_ids)

    # -- results ------------------------------------------------------------------------------

    async def job(self, job_id: int) -> JobHandle:
        """A handle for a job enqueued earlier (a web request that comes back with the id);
        JobNotFound if no such job exists."""
        return await self._results.job(job_id)

    async def gather(
        self,
        handles: Iterable[JobHandle],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> list[Any]:
        """The results of many jobs, in the handles' order, woken together (one query per
        wake-up, however many handles). The first dead or cancelled job raises JobFailed or
        JobCancelled, unless ``return_exceptions``, which puts the error in its place;
        TimeoutError if they are not all finished in ``timeout`` s (the jobs go on)."""
        return await self._results.gather(
            handles, timeout=timeout, return_exceptions=return_exceptions
        )

    async def wait_for_outcomes(
        self, job_ids: Sequence[int], timeout: float | None = None
    ) -> dict[int, JobOutcome]:
        """Until every job is final: succeeded, dead or cancelled."""
        return await self._results.wait_for_outcomes(job_ids, timeout)

    async def drain(self, *, queues: Sequence[str] | None = None) -> list[JobOutcome]:
        """Run every ready job in this process until none is left (a burst worker), and
        return the outcome of each job it ran, in the order they were written. For tests
        (``skiplock.testing.drain``, which this calls). Ready is due now: a parked
        ``wait_for`` whose timeout has passed runs; a timeout or a retry still to come is not
        waited for."""
        from ._worker.drain import drain  # loaded on first use: the App holds no worker

        return await drain(self, queues=queues)

    # -- operations (``Operations``) -------------------------------------------------------

    async def record_action(
        self, what: str, *, who: str = "", target: str = "", detail: str = ""
    ) -> None:
        """Store a person action in the audit trail (``audit_trail()`` reads it). skiplock's
        own operations below record themselves; a front end records what only it sees
        (the dashboard: refused actions, failed sign-ins)."""
        return await self._operations.record_action(what, who=who, target=target, detail=detail)

    async def audit_trail(
        self, *, limit: int = 100, before_id: int | None = None, database: str | None = None
    ) -> list[AuditEntry]:
        """Who did what, newest first; ``before_id`` (the last id of the page before) pages.

        Several databases: each action is recorded in the database it acted on, so every
        one is read (or the one ``database`` names) and merged newest first by time, the
        limit in total, ``AuditEntry.database`` naming each; an audit id is one database's,
        so ``before_id`` then needs ``database``."""
        return await self._operations.audit_trail(
            limit=limit, before_id=before_id, database=database
        )

    async def get_job(self, job_id: int) -> JobRecord:
        """One job row, or JobNotFound."""
        return await self._operations.get_job(job_id)

    async def job_logs(self, job_id: int) -> list[JobLog]:
        """The logs a job's attempts kept (``job_log=True``), by attempt; [] when it kept none
        (or is gone). Read from the database the id names."""
        return await self._operations.job_logs(job_id)

    async def release_worker(self, worker_id: str) -> list[int]:
        """Return every lease a worker holds to pending now; the ids released.

        For a worker known to be gone (its supervisor saw its process exit): its jobs and the
        jobs it had claimed ahead would otherwise wait out their leases. ``worker_id`` is the
        worker's ``Worker.id`` (its lease token prefix). The reclaim rule applies as when a
        lease expires: the attempt stays spent (a job that kills its worker runs out of
        attempts), spent attempts go to ``dead``, a cancel asked for goes to ``cancelled``.
        Only rows still under that worker's tokens change, so a live worker is never robbed."""
        return await self._operations.release_worker(worker_id)

    async def retry_job(self, job_id: int, *, who: str = "") -> bool:
        """Requeue a finished (usually dead) job with its attempts reset; recorded on the job.

        DuplicateJob if a live job now holds the job's unique key (it stays as it was)."""
        return await self._operations.retry_job(job_id, who=who)

    async def cancel_job(self, job_id: int, *, who: str = "") -> JobState:
        """Cancel a job: a pending one never runs; a running one is flagged and cancelled by
        its worker within about a second, or, if that worker is gone, by the sweep that finds
        its lease expired (final state ``cancelled`` either way). Returns the state after."""
        return await self._operations.cancel_job(job_id, who=who)

    async def list_jobs(
        self,
        state: JobState | None = None,
        where: JobFilter | None = None,
        *,
        before_id: int | None = None,
        oldest_first: bool = False,
        database: str | None = None,
    ) -> list[JobRecord]:
        """Jobs in a state (any if None) matching a filter, newest first; ``before_id`` (the
        last id of the page before) pages by keyset, as fast deep in the table as at its top.

        ``oldest_first``: the order ``requeue_dead``/``discard_dead`` pick in, so a list with
        the same filter and limit previews exactly the jobs they act on (``before_id`` then
        pages forward: the last id of the page before, larger ids after it).

        Several databases: every one is read (or the one ``database`` names), in the order
        of their ids (database number; ids run with it), so the limit, the order and
        ``before_id`` hold across them; ids in ``where`` read only the databases they name."""
        return await self._operations.list_jobs(
            state, where, before_id=before_id, oldest_first=oldest_first, database=database
        )

    async def count_jobs(
        self,
        state: JobState | None = None,
        where: JobFilter | None = None,
        *,
        database: str | None = None,
    ) -> int:
        """How many jobs ``list_jobs`` would find without its limit (a bulk action's preview),
        over every database or the one ``database`` names."""
        return await self._operations.count_jobs(state, where, database=database)

    async def count_jobs_by_state(
        self, where: JobFilter | None = None, *, database: str | None = None
    ) -> dict[str, int]:
        """How many jobs match ``where`` in each state, in one pass (states with none left
        out; claimed jobs count as running, their state), over every database or one."""
        return await self._operations.count_jobs_by_state(where, database=database)

    async def find_jobs(
        self, text: str, *, limit: int = 50, database: str | None = None
    ) -> list[JobRecord]:
        """The jobs a person means by ``text``: the job with that id (if ``text`` is one),
        then, newest first, those whose unique key or correlation id is exactly ``text``.
        A search, not a hot path: a key or correlation id is looked for by reading the table.
        Several databases: every one (or ``database``), newest first as ``list_jobs`` (the
        last-numbered database's first), the limit in total."""
        return await self._operations.find_jobs(text, limit=limit, database=database)

    async def dead_groups(
        self, limit: int = 200, *, database: str | None = None
    ) -> list[DeadGroup]:
        """Dead jobs grouped by task and last error message, the largest groups first.
        Several databases: each database's groups apart (``DeadGroup.database``), every
        database's (or ``database``'s), the limit in total."""
        return await self._operations.dead_groups(limit, database=database)

    async def cron_last_runs(self, *, database: str | None = None) -> list[CronRun]:
        """Each schedule's most recent slot and the job it enqueued, by schedule name.
        Several databases: the latest slot over every database (or ``database``'s),
        ``CronRun.database`` naming the one it is in."""
        return await self._operations.cron_last_runs(database=database)

    async def requeue_dead(
        self, where: JobFilter, *, who: str = "", database: str | None = None
    ) -> list[int]:
        """Dead jobs matching ``where`` back to pending with attempts reset; their ids.

        At most ``where.limit`` of them, the oldest first (what ``list_jobs(JobState.DEAD,
        where, oldest_first=True)`` shows), chosen and changed in one statement;
        ``count_jobs(JobState.DEAD, where)`` afterwards says how many still match. A dead job
        whose unique key a live job now holds stays dead (not in the ids).

        Several databases: each in turn (or the one ``database`` names), in the order
        ``list_jobs`` shows them, each picking what the limit leaves: never more than
        ``where.limit`` in total, and the jobs the same ``list_jobs`` previews."""
        return await self._operations.requeue_dead(where, who=who, database=database)

    async def discard_dead(
        self, where: JobFilter, *, who: str = "", database: str | None = None
    ) -> list[int]:
        """Dead jobs matching ``where`` to ``cancelled`` (kept until retention); their ids.

        At most ``where.limit``, the oldest first, as ``requeue_dead`` (databases too)."""
        return await self._operations.discard_dead(where, who=who, database=database)

    async def prune(
        self,
        *,
        finished_age_s: float,
        dead_age_s: float,
        batch: int = 1000,
        who: str = "",
        database: str | None = None,
    ) -> int:
        """Delete now, in batches, what is past a retention (the same statement the workers'
        pruner runs): succeeded and cancelled jobs finished ``finished_age_s`` ago, dead ones
        ``dead_age_s`` ago. How many rows went (every database's, or ``database``'s)."""
        return await self._operations.prune(
            finished_age_s=finished_age_s,
            dead_age_s=dead_age_s,
            batch=batch,
            who=who,
            database=database,
        )

    async def prune_preview(
        self, *, finished_age_s: float, dead_age_s: float, database: str | None = None
    ) -> dict[str, int]:
        """What ``prune`` with these retentions would delete now, counted by state (states
        with nothing to delete left out): the same condition, so a dry run names the set the
        real run's rule takes (rows that age past it in between go too)."""
        return await self._operations.prune_preview(
            finished_age_s=finished_age_s, dead_age_s=dead_age_s, database=database
        )

    async def prune_audit(
        self, *, age_s: float, batch: int = 1000, who: str = "", database: str | None = None
    ) -> int:
        """Delete now, in batches, the audit trail's entries written more than ``age_s``
        seconds ago (the workers' pruner does it past ``retention_audit_s``); how many went.
        The pruning itself is recorded, as the trail's newest entry."""
        return await self._operations.prune_audit(
            age_s=age_s, batch=batch, who=who, database=database
        )

    async def prune_audit_preview(self, *, age_s: float, database: str | None = None) -> int:
        """How many audit trail entries ``prune_audit`` with this age would delete now."""
        return await self._operations.prune_audit_preview(age_s=age_s, database=database)

    async def counts(self, queue: str | None = None) -> dict[str, int]:
        """How many jobs are in each state."""
        return await self._operations.counts(queue)

    async def counts_by_queue(self, *, database: str | None = None) -> dict[str, dict[str, int]]:
        """``counts`` of every queue with a job, in one reading (one count of the table for
        all queues, where a ``counts(queue)`` per queue counts it once each); several
        databases: summed over every one, or of the one ``database`` names."""
        return await self._operations.counts_by_queue(database=database)

    async def queues(self, *, database: str | None = None) -> list[QueueInfo]:
        """Every queue with settings or live jobs, with its settings and live counts.

        Cheap at any history: it reads the settings and the live rows through their indexes
        (pending, claimed ahead, running), never a finished row. Several databases: each
        database's queues (or ``database``'s), ``QueueInfo.database`` naming it."""
        return await self._operations.queues(database=database)

    async def queue_info(self, queue: str, *, database: str = DEFAULT) -> QueueInfo:
        """One queue's settings and its pending, claimed and running counts, through the
        live rows' indexes only (a probe or an adapter may call it often). A name nothing
        uses reads as an empty queue without limits. Of one database (the App's own unless
        ``database`` names another)."""
        return await self._operations.queue_info(queue, database=database)

    async def pause_queue(
        self, queue: str, *, who: str = "", create: bool = False, database: str | None = None
    ) -> None:
        """Workers stop claiming from ``queue`` within one poll interval; running jobs finish.

        ``queue`` must be known (a task of the app, a setting, or any job row names it)
        unless ``create``: then a new name is set up (paused before its first job).
        Written to every database of the App (a queue's jobs may be in any), or to
        ``database`` alone."""
        return await self._operations.pause_queue(queue, who=who, create=create, database=database)

    async def resume_queue(
        self, queue: str, *, who: str = "", create: bool = False, database: str | None = None
    ) -> None:
        """Let workers claim from ``queue`` again (known, or ``create``, and databases, as
        ``pause_queue``)."""
        return await self._operations.resume_queue(queue, who=who, create=create, database=database)

    async def set_queue_limits(
        self,
        queue: str,
        *,
        max_depth: int | Kept | None = KEPT,
        max_running: int | Kept | None = KEPT,
        rate_per_s: float | Kept | None = KEPT,
        aging_s: float | Kept | None = KEPT,
        who: str = "",
        create: bool = False,
        database: str | None = None,
    ) -> None:
        """Bound a queue (``max_depth``: enqueue raises QueueFull past it) and limit it across
        every worker (``max_running`` at once, ``rate_per_s`` starts a second), and age its
        priorities (``aging_s``: a ready job's effective priority is ``priority + floor(wait /
        aging_s)``, so a flood of higher priorities cannot starve it). A call sets the ones
        it names, None lifting one; those left out stay as they are. The queue must be known
        unless ``create``, and written to every database, as ``pause_queue``."""
        return await self._operations.set_queue_limits(
            queue,
            max_depth=max_depth,
            max_running=max_running,
            rate_per_s=rate_per_s,
            aging_s=aging_s,
            who=who,
            create=create,
            database=database,
        )

    async def pause_task(
        self, task: str, *, for_s: float | None = None, reason: str = "", who: str = ""
    ) -> None:
        """Stop every worker claiming jobs of ``task`` (until resumed, or for ``for_s``):
        written to every database of the App."""
        return await self._operations.pause_task(task, for_s=for_s, reason=reason, who=who)

    async def resume_task(self, task: str, *, who: str = "") -> bool:
        """Lift a task's pause (a person's or the breaker's) in every database; False if it
        was paused in none."""
        return await self._operations.resume_task(task, who=who)

    async def task_pauses(self, *, database: str | None = None) -> list[TaskPause]:
        """The paused tasks of every database (or ``database``'s), ``TaskPause.database``
        naming it."""
        return await self._operations.task_pauses(database=database)

    # -- health reads (``Observe``) ----------------------------------------------------------

    async def stats(
        self,
        *,
        queue: str | None = None,
        task: str | None = None,
        window_s: float = DEFAULT_WINDOW_S,
        database: str = DEFAULT,
    ) -> Stats:
        """The health numbers now, per queue, per task and in total, over the last
        ``window_s`` seconds (depths are now), optionally of one ``queue`` and/or ``task``.

        One consistent reading (one snapshot, one database now); cheap at any history size:
        every part reads a partial index or the window's range of one. Beside it, ``storage``:
        what holds the storage's upkeep back now, and who (docs/operations/storage.md).
        Of one database: the App's own, or the one ``database`` names (``Stats.database``;
        ``skiplock stats`` reads each in turn).
        """
        return await self._observe.stats(
            queue=queue, task=task, window_s=window_s, database=database
        )

    async def blocked_keys(
        self, limit: int = DEFAULT_KEYS_SHOWN, *, database: str | None = None
    ) -> list[BlockedKey]:
        """The ordered keys (``ordering_key``, ``ordering_on_dead="block"``) a dead job
        holds, the oldest first (1 to 1,000 of them): none of a key's jobs runs until a person
        retries or discards its dead job (``retry_job``, ``discard_dead``). Several
        databases: every one's (or ``database``'s), the limit in total, ``.database`` set."""
        return await self._observe.blocked_keys(limit, database=database)

    async def busiest_keys(
        self,
        limit: int = DEFAULT_KEYS_SHOWN,
        *,
        queue: str | None = None,
        task: str | None = None,
        database: str | None = None,
    ) -> list[KeyLoad]:
        """The ``limit`` concurrency keys (1 to 1,000) with the most running jobs, then the
        most ready, with their pending count and limit, of one ``queue`` and/or ``task``:
        which tenants are taking the workers, and which wait at their cap. Reads every live
        keyed job, never history. Several databases: every one's (or ``database``'s), merged
        in that order, the limit in total, ``KeyLoad.database`` naming each key's."""
        return await self._observe.busiest_keys(limit, queue=queue, task=task, database=database)

    async def workers(self, *, database: str | None = None) -> list[WorkerInfo]:
        """Every worker in the live-worker registry (each upserts its row on its maintenance
        beat and removes it when it stops; rows silent for an hour are forgotten), by name.
        Several databases: each one's registry (or ``database``'s), ``WorkerInfo.database``
        naming it."""
        return await self._observe.workers(database=database)

    # -- the sync bridge ----------------------------------------------------------------------

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run on the app's private loop thread: one loop (and pool) for all sync callers."""
        with self._sync_lock:
            if self._sync_loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="skiplock-sync", daemon=True).start()
                self._sync_loop = loop
        return asyncio.run_coroutine_threadsafe(coro, self._sync_loop).result()
