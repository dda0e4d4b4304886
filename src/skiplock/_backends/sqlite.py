"""SQLite through the standard library, on one dedicated thread per backend.

Each operation is one function run on that thread, holding one ``BEGIN IMMEDIATE``
transaction: a single hop between the event loop and the thread per operation, however many
statements it takes. WAL lets readers run beside the writer; ``synchronous=FULL`` is chosen
explicitly, because batching makes durability cheap (DESIGN.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

from .._job import (
    ClaimedJob,
    Completion,
    NewJob,
    SlotOutcome,
)
from .._transitions import transition
from ..errors import BackendError, ConfigurationError, QueueFull
from . import flows
from . import sqlite_sql as sql
from .base import (
    MAX_ERRORS_KEPT,
    ClaimParams,
    Clock,
    CronSlotClaimParams,
    JobHeartbeatManyParams,
    JobPruneParams,
)
from .common import claimed_jobs, map_inserted
from .sqlite_control import SQLiteControl
from .sqlite_support import dt as _dt
from .sqlite_support import immediate as _immediate
from .sqlite_support import wrapped as _wrapped

T = TypeVar("T")
log = logging.getLogger("skiplock.worker")

BUSY_TIMEOUT_MS = 10_000
WATCH_MIN_S = 0.005
WATCH_MAX_S = 0.1
"""How often a listening worker checks the file for commits: every 5 ms after a change,
backing off to every 100 ms while nothing changes (``listen``)."""


NOTHING = "SELECT 1 WHERE 0"
"""The claim of an empty list of queues."""

_in_queues = functools.lru_cache(maxsize=16)(sql.job_get_available_in_queues)


def _insert_rows(conn: sqlite3.Connection, jobs: Sequence[NewJob], now: float) -> list[int]:
    """Insert a batch on ``conn`` inside whatever transaction it is in; ids in input order.

    Bounded queues are checked first (all or nothing: QueueFull before any row is written).
    Without unique keys, AUTOINCREMENT inside one write transaction hands out consecutive ids,
    so the last id gives all of them without a round trip per row.
    """
    for queue in sorted({j.queue for j in jobs}):
        bound = conn.execute(sql.QUEUE_DEPTH_LIMIT, {"queue": queue}).fetchone()
        wanted = sum(1 for j in jobs if j.queue == queue)
        if bound is not None and bound[1] + wanted > bound[0]:
            raise QueueFull(f"queue {queue!r} is at its max_depth: nothing was enqueued")
    if any(j.unique_key for j in jobs):
        return _insert_unique(conn, jobs, [_row(j, now) for j in jobs])
    step = sql.JOB_INSERT_ROWS_MAX
    for start in range(0, len(jobs), step):
        chunk = jobs[start : start + step]
        values = [v for j in chunk for v in _values(j, now)]
        statement = sql.JOB_INSERT_ROWS.format(
            n=len(chunk), rows=", ".join([sql.JOB_INSERT_ROW] * len(chunk))
        )
        conn.execute(statement, values)
    last = int(conn.execute(sql.LAST_INSERT_ID).fetchone()[0])
    return list(range(last - len(jobs) + 1, last + 1))


def _values(j: NewJob, now: float) -> tuple[Any, ...]:
    """A job's values in JOB_INSERT_ROW's order."""
    return (
        j.task,
        j.queue,
        j.args_json,
        j.kwargs_json,
        j.priority,
        j.max_attempts,
        j.run_at.timestamp() if j.run_at else now + (j.run_after_s or 0.0),
        j.timeout,
        j.correlation_id,
        now,
        j.lease_s,
        j.unique_key,
        j.unique_succeeded,
    )


def _row(j: NewJob, now: float) -> dict[str, Any]:
    return {
        "task": j.task,
        "queue": j.queue,
        "args": j.args_json,
        "kwargs": j.kwargs_json,
        "priority": j.priority,
        "max_attempts": j.max_attempts,
        "run_at": j.run_at.timestamp() if j.run_at else now + (j.run_after_s or 0.0),
        "timeout": j.timeout,
        "correlation_id": j.correlation_id,
        "now": now,
        "lease_s": j.lease_s,
        "unique_key": j.unique_key,
        "unique_succeeded": j.unique_succeeded,
    }


def _insert_unique(
    conn: sqlite3.Connection, jobs: Sequence[NewJob], rows: list[dict[str, Any]]
) -> list[int]:
    inserted: list[tuple[int, str | None]] = []
    live: dict[str, int] = {}
    for job, row in zip(jobs, rows, strict=True):
        created = conn.execute(sql.JOB_INSERT_UNIQUE, row).fetchone()
        if created is not None:
            inserted.append((created[0], job.unique_key))
        elif job.unique_key not in live:
            existing = conn.execute(
                sql.JOB_LIVE_BY_UNIQUE_KEY, {"unique_key": job.unique_key}
            ).fetchone()
            live[str(job.unique_key)] = existing[0]
    return map_inserted(jobs, inserted, live)


def _completion_args(c: Completion, now: float) -> dict[str, Any]:
    """One outcome's columns, as its transition says (the SQL only writes them)."""
    change = transition(c.disposition, c.delay_s)
    return {
        "id": c.job_id,
        "token": c.lease_token,
        "state": change.state.value,
        "attempt_delta": change.attempt_delta,
        "run_at": None if change.run_after_s is None else now + change.run_after_s,
        "finished_at": now if change.finished else None,
        "error": json.dumps(c.error) if c.error is not None else None,
        "max_errors": MAX_ERRORS_KEPT,
    }


def _claimed(rows: list[Any]) -> list[ClaimedJob]:
    return claimed_jobs(rows, _dt)


def sqlite_path(url: str) -> str:
    """``sqlite:///rel.db`` -> ``rel.db``; ``sqlite:////abs.db`` -> ``/abs.db``."""
    parts = urlsplit(url)
    if parts.netloc:
        raise ConfigurationError(f"url={url!r}: a SQLite URL has no host; use sqlite:///PATH")
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not path or path == ":memory:":
        raise ConfigurationError(
            f"url={url!r}: give a file path; an in-memory database cannot be shared by workers"
        )
    return path


class _Answers:
    """A flow's steps (flows.py) answered on one connection, inside the caller's transaction."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        now: Callable[[], float],
        claim: Callable[[ClaimParams, str | None], tuple[str, dict[str, Any]]],
    ) -> None:
        self.conn, self.now, self.claim = conn, now, claim

    def __call__(self, step: object) -> Any:
        return self.answer(step)

    @functools.singledispatchmethod
    def answer(self, step: object) -> Any:
        raise TypeError(f"no SQLite answer to {step!r}")

    @answer.register
    def _(self, step: flows.LockQueue) -> flows.QueueLimits | None:
        row = self.conn.execute(sql.QUEUE_LOCK, {"queue": step.queue}).fetchone()
        if row is None:
            return None
        return flows.QueueLimits(row[0], row[1], bool(row[2]), json.loads(row[3]), self.now())

    @answer.register
    def _(self, step: flows.CountRunning) -> int:
        return int(self.conn.execute(sql.QUEUE_RUNNING, {"queue": step.queue}).fetchone()[0])

    @answer.register
    def _(self, step: flows.ClaimFromQueue) -> list[Any]:
        statement, args = self.claim(step.params, step.queue)
        return self.conn.execute(statement, {**args, "now": step.now}).fetchall()

    @answer.register
    def _(self, step: flows.SetStarts) -> None:
        self.conn.execute(
            sql.QUEUE_STARTS_SET, {"starts": json.dumps(step.starts), "queue": step.queue}
        )

    @answer.register
    def _(self, step: flows.InsertSlot) -> bool:
        args = {"schedule": step.schedule, "slot": step.slot.timestamp(), "now": self.now()}
        return self.conn.execute(sql.CRON_SLOT_INSERT, args).rowcount > 0

    @answer.register
    def _(self, step: flows.PreviousRunLive) -> bool:
        return bool(
            self.conn.execute(sql.CRON_PREVIOUS_RUN_LIVE, {"schedule": step.schedule}).fetchone()[0]
        )

    @answer.register
    def _(self, step: flows.InsertJob) -> int:
        return _insert_rows(self.conn, [step.job], self.now())[0]

    @answer.register
    def _(self, step: flows.SetSlotOutcome) -> None:
        args = {
            "job_id": step.job_id,
            "skipped": int(step.skipped),
            "schedule": step.schedule,
            "slot": step.slot.timestamp(),
        }
        self.conn.execute(sql.CRON_SLOT_SET_OUTCOME, args)


class SQLiteBackend(SQLiteControl):
    """The Backend protocol on one SQLite file."""

    supports_push = True

    def __init__(self, url: str, *, clock: Clock | None = None) -> None:
        self.url = url
        self.path = sqlite_path(url)
        self._clock = clock
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None

    def _now(self) -> float:
        return self._clock().timestamp() if self._clock else time.time()

    async def _run(self, operation: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._executor is None or self._conn is None:
            raise BackendError("the SQLite backend is not open")
        conn = self._conn

        def call() -> T:
            with _wrapped(operation):
                return fn(conn)

        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def open(self) -> None:
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="skiplock-sqlite")

        def connect() -> sqlite3.Connection:
            with _wrapped("connect"):
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = FULL")
                conn.row_factory = sqlite3.Row  # rows read by column name, or by position
                return conn

        loop = asyncio.get_running_loop()
        self._conn = await loop.run_in_executor(self._executor, connect)

    async def close(self) -> None:
        executor, conn = self._executor, self._conn
        self._executor = self._conn = None
        if executor is None:
            return
        if conn is not None:
            await asyncio.get_running_loop().run_in_executor(executor, conn.close)
        executor.shutdown(wait=True)

    async def migrate(self) -> list[int]:
        def migrate(conn: sqlite3.Connection) -> list[int]:
            applied: list[int] = []
            with _immediate(conn):
                conn.execute(sql.MIGRATIONS_TABLE)
                done = {r[0] for r in conn.execute(sql.MIGRATION_VERSIONS)}
                for version, name, body in sql.MIGRATIONS:
                    if version not in done:
                        for statement in body.split(";"):
                            if statement.strip():
                                conn.execute(statement)
                        conn.execute(
                            sql.MIGRATION_RECORD,
                            {"version": version, "name": name, "now": self._now()},
                        )
                        applied.append(version)
            return applied

        return await self._run("migrate", migrate)

    async def schema_version(self) -> tuple[int, int]:
        def version(conn: sqlite3.Connection) -> int:
            if not conn.execute(sql.MIGRATIONS_TABLE_EXISTS).fetchone()[0]:
                return 0
            return int(conn.execute(sql.SCHEMA_VERSION).fetchone()[0])

        current = await self._run("schema_version", version)
        return current, sql.MIGRATIONS[-1][0]

    async def job_insert_many(
        self, jobs: Sequence[NewJob], connection: object | None = None
    ) -> list[int]:
        if not jobs:
            return []
        if connection is not None:
            return self.job_insert_many_sync(jobs, connection)

        def insert(conn: sqlite3.Connection) -> list[int]:
            with _immediate(conn):
                return _insert_rows(conn, jobs, self._now())

        return await self._run("job_insert_many", insert)

    def job_insert_many_sync(self, jobs: Sequence[NewJob], connection: object) -> list[int]:
        if not isinstance(connection, sqlite3.Connection):
            raise TypeError(
                f"connection: a SQLite app takes a sqlite3.Connection, got {type(connection)!r}"
            )
        with _wrapped("job_insert_many"):
            return _insert_rows(connection, jobs, self._now())

    def _claim(self, params: ClaimParams, queue: str | None) -> tuple[str, dict[str, Any]]:
        """The claim statement and its arguments: all queues, or the named ones."""
        args = {
            "now": self._now(),
            "worker": params.worker,
            "token": params.lease_token,
            "default_lease": params.default_lease,
            "margin": params.lease_margin,
            "limit": params.limit,
            "limited": queue is not None,
        }
        queues = [queue] if queue else params.queues
        if queues is None:
            return sql.JOB_GET_AVAILABLE, args
        queues = list(dict.fromkeys(queues))  # a queue named twice would count twice
        if not queues:
            return NOTHING, {}
        args.update((f"q{i}", name) for i, name in enumerate(queues))
        return _in_queues(len(queues)), args

    async def job_get_available(self, params: ClaimParams) -> list[ClaimedJob]:
        def claim(conn: sqlite3.Connection) -> list[Any]:
            with _immediate(conn):
                statement, args = self._claim(params, None)
                return conn.execute(statement, args).fetchall()

        return _claimed(await self._run("job_get_available", claim))

    async def job_get_available_limited(self, params: ClaimParams) -> list[ClaimedJob]:
        def claim(conn: sqlite3.Connection) -> list[Any]:
            with _immediate(conn):
                return flows.drive(flows.limited_claim(params), self._answerer(conn))

        return _claimed(await self._run("job_get_available_limited", claim))

    def _answerer(self, conn: sqlite3.Connection) -> _Answers:
        return _Answers(conn, self._now, self._claim)

    async def queue_limited(self) -> list[str]:
        rows = await self._run("queue_limited", lambda c: c.execute(sql.QUEUE_LIMITED).fetchall())
        return [r[0] for r in rows]

    async def warm_up(self) -> None:
        pass  # one connection, opened with the backend; statements compile in microseconds

    async def job_set_state_if_running_many(self, completions: Sequence[Completion]) -> list[int]:
        if not completions:
            return []

        def complete(conn: sqlite3.Connection) -> list[int]:
            applied: list[int] = []
            with _immediate(conn):
                now = self._now()
                for c in completions:
                    args = _completion_args(c, now)
                    if conn.execute(sql.JOB_SET_STATE_IF_RUNNING_MANY, args).rowcount:
                        applied.append(c.job_id)
            return applied

        return await self._run("job_set_state_if_running_many", complete)

    async def job_cancel_requested(self, job_ids: Sequence[int]) -> list[int]:
        if not job_ids:
            return []
        ids = json.dumps(list(job_ids))
        rows = await self._run(
            "job_cancel_requested",
            lambda c: c.execute(sql.JOB_CANCEL_REQUESTED, {"ids": ids}).fetchall(),
        )
        return [r[0] for r in rows]

    async def job_prune(self, params: JobPruneParams) -> int:
        def prune(conn: sqlite3.Connection) -> int:
            with _immediate(conn):
                now = self._now()
                args = {
                    "finished_before": now - params.finished_age_s,
                    "dead_before": now - params.dead_age_s,
                    "batch": params.batch,
                }
                return conn.execute(sql.JOB_PRUNE, args).rowcount

        return await self._run("job_prune", prune)

    async def job_reclaim_expired(self) -> list[int]:
        def reclaim(conn: sqlite3.Connection) -> list[int]:
            with _immediate(conn):
                args = {"now": self._now(), "max_errors": MAX_ERRORS_KEPT}
                return [r[0] for r in conn.execute(sql.JOB_RECLAIM_EXPIRED, args).fetchall()]

        return await self._run("job_reclaim_expired", reclaim)

    async def job_heartbeat_many(self, params: JobHeartbeatManyParams) -> list[int]:
        if not params.held:
            return []

        def beat(conn: sqlite3.Connection) -> list[int]:
            still: list[int] = []
            with _immediate(conn):
                now = self._now()
                for job_id, token in params.held:
                    args = {
                        "id": job_id,
                        "token": token,
                        "now": now,
                        "default_lease": params.default_lease,
                        "margin": params.lease_margin,
                    }
                    if conn.execute(sql.JOB_HEARTBEAT_MANY, args).rowcount:
                        still.append(job_id)
            return still

        return await self._run("job_heartbeat_many", beat)

    async def cron_slot_claim(self, params: CronSlotClaimParams) -> tuple[SlotOutcome, int | None]:
        def claim(conn: sqlite3.Connection) -> tuple[SlotOutcome, int | None]:
            with _immediate(conn):
                return flows.drive(flows.cron_slot(params), self._answerer(conn))

        return await self._run("cron_slot_claim", claim)

    @asynccontextmanager
    async def listen(self, on_wake: Callable[[str], None]) -> AsyncIterator[asyncio.Event]:
        """Wake on any commit to the file by another connection, this process's or another's.

        SQLite has no NOTIFY. ``PRAGMA data_version`` changes when another connection has
        committed, and reading it costs microseconds, so the worker reads it on a timer and
        wakes (every queue: the file does not say which) instead of waiting out its poll
        interval. The timer is what costs: ~0.2 ms of CPU a tick on the benchmark VM, so it
        runs every 5 ms after a change and backs off to every 100 ms while nothing changes.
        The yielded event is set if the watcher's connection fails.
        """
        lost = asyncio.Event()
        with _wrapped("listen"):
            conn = sqlite3.connect(self.path)
            version = conn.execute(sql.DATA_VERSION).fetchone()[0]

        async def watch() -> None:
            nonlocal version
            interval = WATCH_MIN_S
            while True:
                await asyncio.sleep(interval)
                interval = min(WATCH_MAX_S, interval * 1.5)
                try:
                    now = conn.execute(sql.DATA_VERSION).fetchone()[0]
                except sqlite3.OperationalError:
                    continue  # busy for a moment (a checkpoint): the next tick reads it
                except sqlite3.Error as exc:
                    log.warning("SQLite change watcher failed (%s)", exc)
                    lost.set()
                    return
                if now != version:
                    version, interval = now, WATCH_MIN_S
                    on_wake("*")

        watcher = asyncio.create_task(watch(), name="skiplock-sqlite-watch")
        try:
            yield lost
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            conn.close()
