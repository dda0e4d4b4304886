"""``Enqueuer``: the enqueue and wake path of an app. It inserts prepared jobs (alone, in the
caller's transaction, or through SQLAlchemy), opens the enqueue span when the app is traced,
runs them at once in eager mode, and wakes this process's workers after an insert it
committed itself (through the ``Registry``, which the workers listen on).

A part the App composes; the public methods' documentation is on ``App``."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from . import _sqlalchemy
from ._backends import Backend, BackendGetter
from ._backends.inserts_here import InsertsHere, inserts_here
from ._backends.params import JobInsertManyParams
from ._backends.workflow_params import WorkflowEnqueueParams, WorkflowEnqueueSyncParams
from ._backends.workflow_plan import Node, Plan, existing
from ._batch import joined_batch
from ._eager import EagerMode
from ._job import NewJob
from ._lanes import Directory
from ._limits import MAX_TEXT_BYTES, oversized, text_bytes
from ._registry import Registry
from ._task import Enqueuing, JobHandle
from .errors import ConfigurationError

T = TypeVar("T")

RunSync = Callable[[Coroutine[Any, Any, T]], T]


def plan_of(jobs: Sequence[NewJob], joining: tuple[int, str] | None) -> Plan:
    """Jobs enqueued one by one (``depends_on`` on each, or inside a batch: its id and
    database) as a plan."""
    nodes = tuple(
        Node(
            job,
            tuple(existing(p) for p in job.depends_on),
            None,
            job.on_parent_failure,
        )
        for job in jobs
    )
    if joining is None:
        return Plan(nodes)
    return Plan(nodes, batch_id=joining[0], batch_database=joining[1])


def _ignore_ids(_ids: Sequence[int]) -> None:
    """What an untraced enqueue does with the ids it inserted."""


_LABELS = ("task", "queue", "unique_key", "concurrency_key", "correlation_id")
"""A job's text columns that an index holds (``_limits.MAX_TEXT_BYTES``)."""
_ALWAYS_FITS = MAX_TEXT_BYTES // 4
"""Labels of this many characters together fit whatever they hold (UTF-8: 4 bytes at most)."""


def refuse_oversized(jobs: Sequence[NewJob]) -> None:
    """Refuse the whole batch, before anything is written, if a job's label is over
    MAX_TEXT_BYTES, naming the job's place in it, its task, the label and its size.

    ``prepare`` checked these already; a job changed since (its fields are plain attributes)
    must still fail here, alone and by name, not as the database's error for the whole batch
    (PostgreSQL's index refuses the row; SQLite would take it). One addition per job when the
    labels are short, which they nearly always are."""
    for index, job in enumerate(jobs):
        short = (
            len(job.task)
            + len(job.queue)
            + len(job.unique_key or "")
            + len(job.concurrency_key or "")
            + len(job.correlation_id or "")
        )
        if short <= _ALWAYS_FITS:
            continue
        for option in _LABELS:
            value = getattr(job, option)
            if value is None:
                continue
            size = text_bytes(option, value)
            if size > MAX_TEXT_BYTES:
                raise ConfigurationError(
                    f"job {index + 1} of {len(jobs)} (task {job.task!r}): "
                    f"{oversized(option, value, size)} (nothing was enqueued)"
                )


class Enqueuer:
    """Writes an app's jobs; ``owner`` (the app) is what the handles it returns call."""

    def __init__(
        self,
        registry: Registry,
        backend: BackendGetter,
        new_backend: Callable[[], Backend],
        eager: EagerMode,
        owner: Enqueuing,
        url: Callable[[], str],
        directory: Directory | None = None,
        backend_of: Callable[[str], Awaitable[Backend]] | None = None,
        new_backend_of: Callable[[str], Backend] | None = None,
    ) -> None:
        self._registry = registry
        self._backend = backend
        self._directory = directory if directory is not None and directory.several else None
        """Several databases: where each lane lives (None: one database, every job in it)."""
        self._backend_of = backend_of
        self._new_backend_of = new_backend_of
        self._new_backend = new_backend
        self._eager = eager
        self._owner = owner
        self._url = url
        self._here: tuple[object, InsertsHere | None] | None = None
        """For the URL and clock it was made for: the SQLite backend a sync enqueue inserts
        through in the caller's thread, or None (another database)."""
        self._here_lock = threading.Lock()
        self._callers: tuple[object, Backend] | None = None
        """For the URL and clock it was made for: the (never opened) backend that writes on
        callers' connections."""

    async def enqueue_many(
        self,
        jobs: Iterable[NewJob],
        *,
        connection: object | None = None,
    ) -> list[JobHandle]:
        batch = list(jobs)
        refuse_oversized(batch)
        joining = joined_batch()
        if joining is not None or any(job.depends_on for job in batch):
            return await self.enqueue_plan(plan_of(batch, joining), connection=connection)
        if self._eager.on:
            return await self._eager.run(self._registry, self._owner, batch)
        parts = self._parts(batch)
        if parts is not None:
            return await self._enqueue_parts(batch, parts, connection)
        backend = await self._backend()
        with self._traced(batch) as inserted:
            if _sqlalchemy.is_sqlalchemy(connection):
                ids = await _sqlalchemy.insert_many(backend, batch, connection)
            else:
                ids = await backend.job_insert_many(JobInsertManyParams(batch, connection))
            inserted(ids)
        if connection is None:
            self._registry.wake_queues({job.queue for job in batch})
        return self._handles(batch, ids)

    def _parts(self, batch: Sequence[NewJob]) -> dict[str, list[int]] | None:
        """Several databases: each database's jobs (their places in ``batch``) by name, in
        the order first met; None with one database."""
        directory = self._directory
        if directory is None:
            return None
        parts: dict[str, list[int]] = {}
        for i, job in enumerate(batch):
            parts.setdefault(directory.database_of(job.lane), []).append(i)
        return parts

    async def _enqueue_parts(
        self, batch: Sequence[NewJob], parts: dict[str, list[int]], connection: object | None
    ) -> list[JobHandle]:
        """A batch over several databases: each database's jobs in one insert of its own
        (each part all or nothing; the parts one after the other). In a caller's transaction
        every job must go to that connection's database."""
        assert self._backend_of is not None
        if connection is not None:
            (database,) = self._one_database(parts, "a caller's connection")
            backend = await self._backend_of(database)
            await self._check_connection(backend, database, connection)
        ids = [0] * len(batch)
        with self._traced(batch) as inserted:
            for database, places in parts.items():
                backend = await self._backend_of(database)
                part = [batch[i] for i in places]
                if _sqlalchemy.is_sqlalchemy(connection):
                    got = await _sqlalchemy.insert_many(backend, part, connection)
                else:
                    got = await backend.job_insert_many(JobInsertManyParams(part, connection))
                for i, job_id in zip(places, got, strict=True):
                    ids[i] = job_id
            inserted(ids)
        if connection is None:
            self._registry.wake_queues({job.queue for job in batch})
        return self._handles(batch, ids)

    def _plan_database(self, plan: Plan) -> str:
        """A workflow lives in one lane (its edges, its releases and its callbacks are one
        database's rows): that lane's database, or a ConfigurationError naming the lanes. A
        batch's members live with the batch, in its database (``app.batch`` opens it where
        its callbacks' lanes are)."""
        jobs = [node.job for node in plan.nodes]
        batch_id, home = plan.batch_id, plan.batch_database
        assert self._directory is not None
        lanes = sorted({job.lane for job in jobs})
        if len(lanes) > 1:
            raise ConfigurationError(
                f"a workflow lives in one lane, and these jobs go to lanes {', '.join(lanes)} "
                "(route their queues to one lane, or give their tasks the same lane=; "
                "nothing was enqueued)"
            )
        database = self._directory.database_of(lanes[0]) if lanes else home
        if batch_id is not None and database != home:
            raise ConfigurationError(
                f"batch {batch_id} lives in database {home!r} (where its callbacks go), and "
                f"these jobs go to database {database!r} (lane {lanes[0]!r}): enqueue them "
                f"outside the batch, or route them to a lane of {home!r} (nothing was "
                "enqueued)"
            )
        return database

    def _one_database(self, parts: dict[str, list[int]], what: str) -> tuple[str]:
        """The one database every job goes to, or a ConfigurationError naming them."""
        if len(parts) == 1:
            (database,) = parts
            return (database,)
        named = ", ".join(f"{len(p)} to {d!r}" for d, p in parts.items())
        raise ConfigurationError(
            f"{what} writes to one database, and these jobs go to several ({named}): "
            "enqueue each database's jobs apart (nothing was enqueued)"
        )

    async def _check_connection(self, backend: Backend, database: str, connection: object) -> None:
        """Refuse a caller's connection to another database than the jobs': the insert
        would commit with the caller's transaction in the wrong place."""
        assert self._directory is not None
        want = self._directory.number_of(database)
        conn = connection
        if _sqlalchemy.is_sqlalchemy(conn):
            conn = await _sqlalchemy.driver_connection(conn)
        self._refuse_other(database, want, await backend.database_number_on(conn))

    def _refuse_other(self, database: str, want: int, got: int | None) -> None:
        if got == want:
            return
        assert self._directory is not None
        names = self._directory.names()
        other = next((repr(n) for n in names if self._directory.number_of(n) == got), None)
        where = (
            f"database {other}"
            if other is not None
            else "no database of this App (its schema holds no numbered skiplock tables)"
            if got is None
            else f"database number {got}, which this App does not name"
        )
        raise ConfigurationError(
            f"connection: it is to {where}, and these jobs go to database {database!r} "
            f"(their lane's): pass a connection to {database!r}, or enqueue without one "
            "(nothing was enqueued)"
        )

    def enqueue_many_sync(
        self, jobs: Iterable[NewJob], *, connection: object | None, run_sync: RunSync[Any]
    ) -> list[JobHandle]:
        batch = list(jobs)
        refuse_oversized(batch)
        joining = joined_batch()  # read here: the app's loop runs in another thread
        if joining is not None or any(job.depends_on for job in batch):
            plan = plan_of(batch, joining)
            return self.enqueue_plan_sync(plan, connection=connection, run_sync=run_sync)
        parts = None if self._eager.on else self._parts(batch)
        if parts is not None and connection is None:
            routed: list[JobHandle] = run_sync(self.enqueue_many(batch))
            return routed
        if connection is None and not self._eager.on:
            here = self._here_backend(run_sync)
            if here is not None:
                with self._traced(batch) as inserted:
                    ids = here.job_insert_many_here(JobInsertManyParams(batch, None))
                    inserted(ids)
                self._registry.wake_queues({job.queue for job in batch})
                return self._handles(batch, ids)
        if connection is None or self._eager.on:
            handles: list[JobHandle] = run_sync(self.enqueue_many(batch))
            return handles
        if _sqlalchemy.is_sqlalchemy(connection):
            connection = _sqlalchemy.driver_connection_sync(connection)
        if asyncio.iscoroutinefunction(getattr(connection, "execute", None)):
            raise TypeError("connection: an async connection needs `await task.aenqueue(...)`")
        backend = self._on_callers()
        if parts is not None:
            backend = self._callers_of(parts, connection)
        with self._traced(batch) as inserted:
            params = JobInsertManyParams(batch, connection)
            ids = backend.job_insert_many_sync(params)
            inserted(ids)
        return self._handles(batch, ids)  # woken at commit, not here (see App.enqueue_many)

    async def enqueue_plan(
        self, plan: Plan, *, connection: object | None = None
    ) -> list[JobHandle]:
        """Write a workflow's jobs (``Plan``) in one transaction; handles in plan order."""
        refuse_oversized([node.job for node in plan.nodes])
        if self._eager.on:
            raise ConfigurationError(
                "workflows (depends_on, chains, groups, chords, batches) do not run in eager "
                "mode: test them with a worker (skiplock.testing's drain)"
            )
        jobs = [node.job for node in plan.nodes]
        if self._directory is None:
            backend = await self._backend()
        else:
            database = self._plan_database(plan)
            assert self._backend_of is not None
            backend = await self._backend_of(database)
            if connection is not None:
                await self._check_connection(backend, database, connection)
        with self._traced(jobs) as inserted:
            if _sqlalchemy.is_sqlalchemy(connection):
                ids = await _sqlalchemy.enqueue_plan(backend, plan, connection)
            else:
                ids = await backend.workflow_enqueue(WorkflowEnqueueParams(plan, connection))
            inserted(ids)
        if connection is None:
            self._registry.wake_queues({job.queue for job in jobs})
        return self._handles(jobs, ids)

    def enqueue_plan_sync(
        self, plan: Plan, *, connection: object | None, run_sync: RunSync[Any]
    ) -> list[JobHandle]:
        """``enqueue_plan`` without an event loop (in the transaction of a sync connection:
        sqlite3's, psycopg's, a SQLAlchemy session's)."""
        if connection is None:
            handles: list[JobHandle] = run_sync(self.enqueue_plan(plan))
            return handles
        if self._eager.on:
            run_sync(self.enqueue_plan(plan))  # refused there, with the reason
        refuse_oversized([node.job for node in plan.nodes])
        if _sqlalchemy.is_sqlalchemy(connection):
            connection = _sqlalchemy.driver_connection_sync(connection)
        if asyncio.iscoroutinefunction(getattr(connection, "execute", None)):
            raise TypeError("connection: an async connection needs `await ....aenqueue()`")
        backend = self._on_callers()
        jobs = [node.job for node in plan.nodes]
        if self._directory is not None:
            self._plan_database(plan)  # one lane, or refused
            parts = self._parts(jobs)
            assert parts is not None
            backend = self._callers_of(parts, connection)
        with self._traced(jobs) as inserted:
            ids = backend.workflow_enqueue_sync(WorkflowEnqueueSyncParams(plan, connection))
            inserted(ids)
        return self._handles(jobs, ids)  # woken at commit, not here

    def _callers_of(self, parts: dict[str, list[int]], connection: object) -> Backend:
        """Several databases, a caller's sync connection: the backend (opening nothing) of
        the one database every job goes to, once the connection is checked to be to it."""
        assert self._directory is not None and self._new_backend_of is not None
        (database,) = self._one_database(parts, "a caller's connection")
        backend = self._new_backend_of(database)
        got = backend.database_number_on_sync(connection)
        self._refuse_other(database, self._directory.number_of(database), got)
        return backend

    def _on_callers(self) -> Backend:
        """The backend a sync enqueue writes through on the caller's connection: it opens
        nothing of its own, so one serves every thread; made again only when the URL or the
        clock changed (Django's enqueue inside ``atomic()`` made one per call before)."""
        key = (self._url(), self._registry.clock)
        made = self._callers
        if made is None or made[0] != key:
            made = self._callers = (key, self._new_backend())
        return made[1]

    def _here_backend(self, run_sync: RunSync[Any]) -> InsertsHere | None:
        """The backend a sync enqueue inserts through in the caller's own thread (SQLite),
        or None: PostgreSQL's drivers are async, so its sync enqueue goes through the app's
        loop. Made once per URL and clock; the first time, the app's own backend is opened
        through the bridge, which checks the schema as every other first call does."""
        key = (self._url(), self._registry.clock)
        here = self._here
        if here is not None and here[0] == key:
            return here[1]
        with self._here_lock:
            if self._here is not None and self._here[0] == key:  # another thread made it
                return self._here[1]
            self.close_here()  # the URL or clock changed: the old file's connection goes
            made = self._new_backend()
            local = made if inserts_here(made) else None
            if local is not None:
                run_sync(self._open())  # opened, and a newer schema refused, as ever
            self._here = (key, local)
        return local

    def close_here(self) -> None:
        """Close the connection sync enqueues insert through in their own thread, if any."""
        here = self._here
        if here is not None and here[1] is not None:
            here[1].close_here()

    async def _open(self) -> None:
        await self._backend()

    def _traced(
        self, batch: Sequence[NewJob]
    ) -> contextlib.AbstractContextManager[Callable[[Sequence[int]], None]]:
        """The enqueue's span if the app is traced (its context stored on each job)."""
        tracing = self._registry.tracing
        if tracing is None or not batch:
            return contextlib.nullcontext(_ignore_ids)
        return tracing.enqueue(batch)

    def _handles(self, batch: Sequence[NewJob], ids: Sequence[int]) -> list[JobHandle]:
        owner = self._owner
        return [JobHandle(i, j.task, j.queue, owner) for i, j in zip(ids, batch, strict=True)]
