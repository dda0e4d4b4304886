"""SQLite through the standard library, on one dedicated thread per backend.

Each operation is one function run on that thread, holding one ``BEGIN IMMEDIATE``
transaction: a single hop between the event loop and the thread per operation, however many
statements it takes. WAL lets readers run beside the writer; ``synchronous=FULL`` is the default,
because batching makes durability cheap (DESIGN.md); ``?synchronous=normal`` in the URL trades
the last commits before a power loss for cheaper commits (``sqlite_url``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import stat
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from .._job import (
    AuditEntry,
    BlockedKey,
    ClaimedJob,
    Completion,
    CronRun,
    DeadGroup,
    Disposition,
    JobOutcome,
    JobRecord,
    JobState,
    KeyLoad,
    NewJob,
    QueueInfo,
    ReclaimedJob,
    SlotOutcome,
    StorageHold,
    TaskPause,
    WorkerInfo,
)
from .._payload import DEFAULT_MAX_PAYLOAD_BYTES
from .._workflow_records import (
    BatchInfo,
    JobLinks,
    LinkedJob,
    SignalReceipt,
    StoredSignal,
    WaitingJob,
    WorkflowGraph,
)
from ..errors import BackendError, BackendUnavailable, JobNotFound, SchemaError
from . import flows, workflow_sweep
from . import sqlite_history as history
from . import sqlite_keys as keys
from . import sqlite_observe as observe
from . import sqlite_ops as ops
from . import sqlite_sql as sql
from . import sqlite_wal as wal
from . import sqlite_workflow as workflow
from . import sqlite_workflow_sql as wf_sql
from . import workflow_flows as wf
from .claim_rules import KeyCursors
from .job_rows import (
    blocked_key,
    dead_group,
    job_outcomes,
    key_load,
    queue_state_counts,
    reclaimed_jobs,
    state_counts,
    worker_info,
)
from .params import (
    AuditRecordParams,
    ClaimParams,
    CronSlotClaimParams,
    CronSlotSyncParams,
    DeadActionParams,
    HotVacuum,
    JobActionParams,
    JobHeartbeatManyParams,
    JobImportOutcomeParams,
    JobInsertManyParams,
    JobListParams,
    JobPruneParams,
    JobStatsParams,
    JobStatsRows,
    QueueSetLimitsParams,
    QueueSetPausedParams,
    Rotation,
    TaskPauseParams,
    WalCheckpoint,
    WorkerBeatParams,
)
from .protocol import (
    HOLD_MIN_S,
    MAX_ERRORS_KEPT,
    NEXT_RUN_PRIORITIES,
    RELEASED_BY_SUPERVISOR,
    Clock,
)
from .sqlite_ids import BATCHES, JOBS, IdLedger, may_roll_back, runs_alone
from .sqlite_support import classify as _classify
from .sqlite_support import dt as _dt
from .sqlite_support import immediate as _immediate
from .sqlite_support import opt_dt as _opt_dt
from .sqlite_support import wrapped as _wrapped
from .sqlite_thread import DatabaseThread
from .sqlite_unique import JOB_KEYS_PASSED
from .sqlite_url import parse_sqlite_url
from .sqlite_watch import open_wal_watch
from .workflow_plan import Plan, SweepResult
from .workflow_rows import batch_info, job_links, linked_jobs, waiting_job

T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger("skiplock.worker")

BUSY_TIMEOUT_MS = 10_000
WATCH_MIN_S = 0.005
WATCH_MAX_S = 0.1
"""Without file notifications, how often a listening worker checks the file for commits:
every 5 ms after a change, backing off to every 100 ms while nothing changes (``listen``)."""
WATCH_BACKSTOP_S = 0.1
"""With file notifications, how often it checks anyway (a lost or unsupported notification)."""


def _next_look(notified: bool, seen: bool, interval: float) -> float:
    """Seconds until the change watcher's next timed look at data_version."""
    if notified:
        return WATCH_BACKSTOP_S
    return WATCH_MIN_S if seen else min(WATCH_MAX_S, interval * 1.5)


def sqlite_path(url: str) -> str:
    """``sqlite:///rel.db`` -> ``rel.db``; ``sqlite:////abs.db`` -> ``/abs.db``."""
    return parse_sqlite_url(url).path


def _lower(value: object) -> str | None:
    """Unicode lower case for the error filter (SQLite's lower() folds only ASCII)."""
    return None if value is None else str(value).lower()


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None when there is none."""
    try:
        st = os.stat(path)
    except OSError:  # gone, or its directory gone: not the file opened, either way
        return None
    return st.st_dev, st.st_ino


def _insert(conn: sqlite3.Connection, jobs: Sequence[NewJob], now: float) -> list[int]:
    """A batch on one of the backend's own connections: one job without a unique key as one
    statement, its own write transaction (``ops.insert_one``); else one BEGIN IMMEDIATE."""
    alone = ops.one_statement(jobs)
    with contextlib.nullcontext(conn) if alone else _immediate(conn):
        return ops.insert_rows(conn, jobs, now)


def _own_sqlite(connection: object) -> sqlite3.Connection:
    """The caller's own connection, which a SQLite app needs to be a sqlite3 one."""
    if not isinstance(connection, sqlite3.Connection):
        raise TypeError(
            f"connection: a SQLite app takes a sqlite3.Connection, got {type(connection)!r}"
        )
    return connection


def _queue_info(r: Any) -> QueueInfo:
    return QueueInfo(r[0], r[1], r[2], r[3], bool(r[4]), r[5], r[6], r[7], r[8])


def _create_private(path: str, mode: int) -> None:
    """Create the database file with ``mode`` before SQLite does (SQLite's own default is 0644
    less the umask, and it gives the -wal and -shm the database file's mode). The chmod makes
    the mode exact, whatever the umask; an existing file is left as it is."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode))
    except OSError:  # it exists, or its directory does not: SQLite says which, as ever
        return
    os.chmod(path, mode)


def _warn_if_world_readable(path: str) -> None:
    """Say so when every user of the host may read the file: its jobs carry arguments,
    results and errors. A file skiplock creates is 0600 (``?mode=`` widens it on purpose, to
    a group at most); one that existed before is used as it is, but not in silence."""
    with contextlib.suppress(OSError):
        mode = os.stat(path).st_mode
        if mode & stat.S_IROTH:
            log.warning(
                "the SQLite file %s is readable by every user of this host (mode %04o): its "
                "jobs carry arguments, results and errors; `chmod o-rw %s` keeps them from "
                "other users",
                path,
                stat.S_IMODE(mode),
                path,
            )


def _statements(body: str) -> list[str]:
    """A migration's statements: its text cut at each ``;`` that SQLite's own tokenizer
    (``sqlite3.complete_statement``) says ends one, so a ``CREATE TRIGGER``'s ``BEGIN ... END``
    stays whole and a ``;`` in a comment or a string ends nothing."""
    out: list[str] = []
    held = ""
    for piece in body.split(";"):
        held += piece + ";"
        if sqlite3.complete_statement(held):
            if held.strip(" \t\n;"):
                out.append(held)
            held = ""
    return out


WORKFLOWS_MIGRATION = 16
"""The migration that lets the live table hold waiting jobs (sqlite_workflow_sql.py)."""

FINISHING_DISPOSITIONS = frozenset({Disposition.SUCCEED, Disposition.CANCEL, Disposition.DEAD})
"""Outcomes after which a job's children may be released."""

HISTORY_APART = 11
"""The migration that put the finished jobs apart (sqlite_history.py): from it on, a migration
applied rebuilds the view over the job tables."""


class SQLiteBackend:
    """The Backend protocol on one SQLite file."""

    supports_push = True
    vacuums_hot = False
    keeps_wal = True
    inserts_here = True

    def __init__(self, url: str, *, clock: Clock | None = None) -> None:
        self.url = url
        options = parse_sqlite_url(url)
        self.path = options.path
        self.synchronous = options.synchronous
        self.mode = options.mode
        self._clock = clock
        self._thread: DatabaseThread | None = None
        self._conn: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None
        self._here_conn: sqlite3.Connection | None = None
        """The connection of ``job_insert_many_here`` (a sync enqueue in its caller's thread)."""
        self._here_lock = threading.Lock()
        self._ids = IdLedger.of(self.path, self.mode)
        """The ids handed out in transactions that may roll back (sqlite_ids.py)."""
        self._key_cursors: KeyCursors = {}
        """Where each keyed claim's walk starts next (sqlite_keys.pick)."""
        self._turns_after = ""
        """Where the upkeep's next look for stale key turn rows starts ("": the first)."""
        self._here_pid = 0
        self._here_file: tuple[int, int] | None = None
        self.on_released: Callable[[set[str]], None] | None = None
        """Told the queues a completion's workflow release made jobs pending in, after its
        commit (a worker wakes its producer: no wait for the file's watch)."""
        self.max_payload_bytes = DEFAULT_MAX_PAYLOAD_BYTES
        """The most bytes a release gives a child as the list of its parents' results (the
        App's ``max_payload_bytes``, set by ``App.new_backend``): a chord's body over it is
        buried (dead, PayloadTooLarge), never run with an argument of hundreds of MB."""

    def _now(self) -> float:
        return self._clock().timestamp() if self._clock else time.time()

    async def _run(self, operation: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._thread is None or self._conn is None:
            raise BackendError("the SQLite backend is not open")
        conn = self._conn

        def call() -> T:
            self._check_same_file(operation, self._file)
            with _wrapped(operation):
                return fn(conn)

        return await self._thread.call(call)

    def _check_same_file(self, operation: str, opened: tuple[int, int] | None) -> None:
        """Refuse to go on if the path no longer names the file ``opened``: deleted (a
        connection keeps writing to the unlinked inode, which nobody else sees, while new
        producers create an empty file at the path) or replaced. One stat, ~1 µs, per
        operation; an operation is a whole transaction, never a statement."""
        now = _identity(self.path)
        if now is None or now != opened:
            raise BackendError(
                f"{operation}: the SQLite file {self.path} was deleted or replaced while "
                "this process had it open; its jobs are no longer at that path. Stopping: "
                "restore the file or migrate a new one, then restart"
            )

    async def open(self, *, create: bool = False) -> None:
        if self._thread is not None:
            return
        self._thread = DatabaseThread("skiplock-sqlite")

        def connect() -> sqlite3.Connection:
            conn = self._connect(create=create)
            self._file = _identity(self.path)  # the pragmas in _connect opened the file
            _warn_if_world_readable(self.path)
            return conn

        try:
            self._conn = await self._thread.call(connect)
        except BaseException:
            self._thread.shutdown()  # a failed open leaves nothing open: the next one retries
            self._thread = None
            raise

    def _connect(self, *, create: bool = False) -> sqlite3.Connection:
        """A connection to the file with skiplock's pragmas (the database thread's, or the
        one ``job_insert_many_here`` keeps for callers' threads)."""
        if not create and not os.path.exists(self.path):
            raise SchemaError(
                f"no SQLite database at {self.path}: run `skiplock migrate` to create "
                "it, or check the URL"
            )
        # Only a migration may make the file: else read-write without create (mode=rw),
        # so a file deleted since the check is an error, not a new empty database.
        target = self.path if create else f"{Path(self.path).absolute().as_uri()}?mode=rw"
        with _wrapped("connect"):
            if create:  # made with its private mode before SQLite makes it
                _create_private(self.path, self.mode)
            conn = sqlite3.connect(
                target, isolation_level=None, check_same_thread=False, uri=not create
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            conn.row_factory = sqlite3.Row  # rows read by column name, or by position
            conn.create_function("skiplock_lower", 1, _lower, deterministic=True)
            self._ids.register(conn)
            return conn

    def job_insert_many_here(self, params: JobInsertManyParams) -> list[int]:
        """``job_insert_many`` in the calling thread, in its own write transaction: a sync
        enqueue (``task.enqueue()``) with no event loop and no thread hop. Through the app's
        sync bridge an enqueue crossed two threads (its loop's, then the database thread's),
        three times the cost of the insert itself at ``synchronous=normal``.

        One connection serves every calling thread, one at a time (SQLite takes one writer
        at a time anyway); it is opened at the first call, again in a forked child, and
        closed by ``close_here``. Like every operation it first checks the file is still the
        one it opened."""
        with self._here_lock:
            conn = self._here_conn
            if conn is None or self._here_pid != os.getpid():
                conn = self._here_conn = self._connect()
                self._here_pid, self._here_file = os.getpid(), _identity(self.path)
            self._check_same_file("job_insert_many", self._here_file)
            with _wrapped("job_insert_many"):
                return _insert(conn, params.jobs, self._now())

    def close_here(self) -> None:
        """Close the connection ``job_insert_many_here`` keeps (the next call opens one)."""
        with self._here_lock:
            conn, self._here_conn = self._here_conn, None
            if conn is not None and self._here_pid == os.getpid():
                conn.close()

    async def close(self) -> None:
        thread, conn = self._thread, self._conn
        self._thread = self._conn = None
        if thread is None:
            return
        if conn is not None:
            await thread.call(conn.close)
        thread.shutdown()

    async def migrate(self) -> list[int]:
        def migrate(conn: sqlite3.Connection) -> list[int]:
            applied: list[int] = []
            with _immediate(conn):
                conn.execute(sql.MIGRATIONS_TABLE)
                done = {r[0] for r in conn.execute(sql.MIGRATION_VERSIONS)}
                for version, name, body in sql.MIGRATIONS:
                    if version not in done:
                        for statement in _statements(body):
                            conn.execute(statement)
                        if version == WORKFLOWS_MIGRATION:
                            wf_sql.widen_state_check(conn)
                        conn.execute(
                            sql.MIGRATION_RECORD,
                            {"version": version, "name": name, "now": self._now()},
                        )
                        applied.append(version)
                if applied and max(done | set(applied)) >= HISTORY_APART:
                    history.follow_live(conn)  # day tables' columns, the view, its triggers
            return applied

        return await self._run("migrate", migrate)

    async def schema_version(self) -> tuple[int, int]:
        def version(conn: sqlite3.Connection) -> int:
            if not conn.execute(sql.MIGRATIONS_TABLE_EXISTS).fetchone()[0]:
                return 0
            return int(conn.execute(sql.SCHEMA_VERSION).fetchone()[0])

        current = await self._run("schema_version", version)
        return current, sql.MIGRATIONS[-1][0]

    async def job_insert_many(self, params: JobInsertManyParams) -> list[int]:
        jobs = params.jobs
        if not jobs:
            return []
        if params.connection is not None:
            return self.job_insert_many_sync(params)

        def insert(conn: sqlite3.Connection) -> list[int]:
            return _insert(conn, jobs, self._now())

        return await self._run("job_insert_many", insert)

    def job_insert_many_sync(self, params: JobInsertManyParams) -> list[int]:
        jobs, connection = params.jobs, _own_sqlite(params.connection)
        with _wrapped("job_insert_many"):
            self._ids.register(connection)
            if runs_alone(connection) and not ops.one_statement(jobs):
                with _immediate(connection):  # raise the counter and insert under one lock
                    return ops.insert_rows(connection, jobs, self._now())
            ids = ops.insert_rows(connection, jobs, self._now())
            if ids and may_roll_back(connection):  # kept before an id is returned (sqlite_ids)
                self._ids.mark(JOBS, max(ids))
            return ids

    @contextlib.contextmanager
    def _handing_out(self, conn: sqlite3.Connection) -> Iterator[None]:
        """Around a workflow's writes on a caller's connection, which hand out job and batch
        ids: ``conn`` reads the id ledger (sqlite_ids.py), and if its transaction is still
        open when they succeed (it may yet roll back), the ledger keeps the ids before they
        are returned."""
        self._ids.register(conn)
        yield
        if may_roll_back(conn):
            for table in (JOBS, BATCHES):
                self._ids.mark_counter(conn, table)

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
            return ops.NOTHING, {}
        args.update((f"q{i}", name) for i, name in enumerate(queues))
        return ops.in_queues(len(queues)), args

    # The claimed rows become ClaimedJobs on the SQLite thread, after the commit: the event
    # loop's thread is what a drain of short jobs waits on, and this is ~8% of its work there.

    async def job_get_available(self, params: ClaimParams) -> list[ClaimedJob]:
        def claim(conn: sqlite3.Connection) -> list[ClaimedJob]:
            with _immediate(conn):
                statement, args = self._claim(params, None)
                rows = conn.execute(statement, args).fetchall()
            return ops.claimed(rows)

        return await self._run("job_get_available", claim)

    async def job_get_available_limited(self, params: ClaimParams) -> list[ClaimedJob]:
        def claim(conn: sqlite3.Connection) -> list[ClaimedJob]:
            with _immediate(conn):
                rows = flows.drive(flows.limited_claim(params), self._answerer(conn))
            return ops.claimed(rows)

        return await self._run("job_get_available_limited", claim)

    async def job_get_available_keyed(self, params: ClaimParams) -> list[ClaimedJob]:
        def claim(conn: sqlite3.Connection) -> list[ClaimedJob]:
            with _immediate(conn):
                rows = self._claim_keyed(conn, params, False)
            return ops.claimed(rows, as_listed=True)

        return await self._run("job_get_available_keyed", claim)

    def _claim_keyed(
        self, conn: sqlite3.Connection, params: ClaimParams, limited: bool
    ) -> list[Any]:
        """The keyed claim's rows, inside the caller's write transaction (sqlite_keys.py)."""
        queues = None if params.queues is None else list(dict.fromkeys(params.queues))
        now = self._now()
        ids = keys.pick(
            conn,
            queues,
            limit=params.limit,
            now=now,
            limited=limited,
            cursors=self._key_cursors,
        )
        if not ids:
            return []
        args = {
            "ids": json.dumps(ids),
            "now": now,
            "worker": params.worker,
            "token": params.lease_token,
            "default_lease": params.default_lease,
            "margin": params.lease_margin,
        }
        rows = conn.execute(sql.JOB_CLAIM_IDS, args).fetchall()
        place = {job_id: n for n, job_id in enumerate(ids)}
        return sorted(rows, key=lambda row: place[row["id"]])  # as the pick took them

    def _answerer(self, conn: sqlite3.Connection) -> ops.Answers:
        return ops.Answers(conn, self._now, self._claim, self._claim_keyed)

    async def queue_limited(self) -> list[str]:
        rows = await self._run("queue_limited", lambda c: c.execute(sql.QUEUE_LIMITED).fetchall())
        return [r[0] for r in rows]

    async def job_next_run_at(self, lookback_s: float = 0.0) -> float | None:
        def read(conn: sqlite3.Connection) -> float | None:
            now = self._now()
            since = now - max(lookback_s, 0.0)
            args = {"now": now, "since": since, "most": NEXT_RUN_PRIORITIES}
            seconds: float | None = conn.execute(sql.JOB_NEXT_RUN_AT, args).fetchone()[0]
            return seconds

        return await self._run("job_next_run_at", read)

    async def job_ready_exists(self, queues: tuple[str, ...] | None) -> bool:
        names = None if queues is None else json.dumps(list(queues))

        def read(conn: sqlite3.Connection) -> bool:
            args = {"now": self._now(), "queues": names, "limited": False}
            return bool(conn.execute(sql.JOB_READY_EXISTS, args).fetchone()[0])

        return await self._run("job_ready_exists", read)

    async def warm_up(self) -> None:
        pass  # one connection, opened with the backend; statements compile in microseconds

    async def job_set_state_if_running_many(self, completions: Sequence[Completion]) -> list[int]:
        if not completions:
            return []

        def complete(conn: sqlite3.Connection) -> tuple[list[int], set[str]]:
            with _immediate(conn):
                applied = ops.complete(conn, completions, self._now())
                woken = self._follow_completion(conn, completions, applied)
                return applied, woken

        applied, woken = await self._run("job_set_state_if_running_many", complete)
        if woken and self.on_released is not None:  # committed: this process's workers
            self.on_released(woken)  # claim now, before the file's watch would tell them
        return applied

    def _follow_completion(
        self, conn: sqlite3.Connection, completions: Sequence[Completion], applied: list[int]
    ) -> set[str]:
        """In the completion's transaction: release the children of jobs just finished (when
        any edge is open at all: one probe of an empty index otherwise), resume parked jobs
        already signalled. Returns the queues it made jobs pending in."""
        written = set(applied)
        parked = [
            c.job_id
            for c in completions
            if c.disposition is Disposition.PARK and c.job_id in written
        ]
        finished: list[int] = []
        if conn.execute(wf_sql.ANY_OPEN_EDGE).fetchone()[0]:
            finished = [
                c.job_id
                for c in completions
                if c.disposition in FINISHING_DISPOSITIONS and c.job_id in written
            ]
        woken: set[str] = set()
        if finished or parked:
            try:
                with _savepoint(conn):  # the outcomes never wait for a release that fails
                    flows.drive(
                        wf.after_completion(finished, parked), self._wf_answers(conn, woken)
                    )
            except Exception as exc:
                if isinstance(exc, sqlite3.Error) and isinstance(
                    _classify("workflow release", exc), BackendUnavailable
                ):
                    raise
                log.warning(
                    "a completion's workflow release failed (the sweep tries it again): %s",
                    exc,
                    exc_info=exc,
                )
                woken.clear()
        return woken

    async def job_cancel_requested(self, job_ids: Sequence[int]) -> list[int]:
        if not job_ids:
            return []
        ids = json.dumps(list(job_ids))
        rows = await self._run(
            "job_cancel_requested",
            lambda c: c.execute(sql.JOB_CANCEL_REQUESTED, {"ids": ids}).fetchall(),
        )
        return [r[0] for r in rows]

    def _retention_args(self, params: JobPruneParams) -> dict[str, float]:
        now = self._now()
        return {
            "finished_before": now - params.finished_age_s,
            "dead_before": now - params.dead_age_s,
        }

    async def job_prune(self, params: JobPruneParams) -> int:
        def prune(conn: sqlite3.Connection) -> int:
            with _immediate(conn):
                args = {**self._retention_args(params), "batch": params.batch}
                # A whole day past the retention first, by DROP TABLE (no page rewritten;
                # one day a call, the caller calls again), then one batch of the rest: the
                # live table's finished and dead rows, and the day the cut-off falls inside.
                dropped = history.drop_expired(conn, args["finished_before"])
                if dropped:
                    return dropped
                deleted = conn.execute(sql.JOB_PRUNE, args).rowcount
                if deleted < params.batch:
                    deleted += history.prune_days(
                        conn, args["finished_before"], params.batch - deleted
                    )
                return int(deleted)

        return await self._run("job_prune", prune)

    async def hot_vacuum(self, min_dead: int) -> HotVacuum | None:
        return None  # a delete or an update here leaves no dead version to collect

    async def rotate_live(self, min_bytes: int) -> Rotation | None:
        return None  # one table, whose deletes leave no dead version behind

    async def storage_hold(
        self, hold: str, min_age_s: float = HOLD_MIN_S, relations: Sequence[str] = ()
    ) -> StorageHold | None:
        if hold != "wal":
            return None  # no lock a rotation needs, no horizon a vacuum waits behind
        return await self._run("storage_hold", lambda c: wal.held(c, self.path))

    async def wal_checkpoint(self, truncate_above: int) -> WalCheckpoint | None:
        def look(conn: sqlite3.Connection) -> WalCheckpoint:
            return wal.checkpoint(conn, self.path, truncate_above, BUSY_TIMEOUT_MS)

        return await self._run("wal_checkpoint", look)

    async def storage_upkeep(self) -> list[str]:
        def make(conn: sqlite3.Connection) -> list[str]:
            # today's day table, so the first finish of a day rarely pays for the DDL (a
            # completion makes it if it is missing: a table is never needed ahead of time)
            with _immediate(conn):
                known = {name for _, name in history.days(conn)}
                made = history.day_target(conn, self._now())  # None: past MAX_DAYS
                self._turns_after = keys.prune_turns(conn, self._turns_after)
                return [] if made is None or made[0] in known else [made[0]]

        return await self._run("storage_upkeep", make)

    async def job_prune_preview(self, params: JobPruneParams) -> dict[str, int]:
        def count(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(sql.JOB_PRUNE_PREVIEW, self._retention_args(params)).fetchall()
            return {str(state): int(n) for state, n in rows}

        return await self._run("job_prune_preview", count)

    async def job_reclaim_expired(self, into: list[ReclaimedJob] | None = None) -> list[int]:
        def reclaim(conn: sqlite3.Connection) -> list[Any]:
            with _immediate(conn):
                args = {"now": self._now(), "max_errors": MAX_ERRORS_KEPT}
                return conn.execute(sql.JOB_RECLAIM_EXPIRED, args).fetchall()

        rows = await self._run("job_reclaim_expired", reclaim)
        if into is not None:
            into += reclaimed_jobs(rows)
        return [r["id"] for r in rows]

    async def job_reclaim_worker(
        self,
        worker_id: str,
        into: list[ReclaimedJob] | None = None,
        why: str = RELEASED_BY_SUPERVISOR,
    ) -> list[int]:
        def reclaim(conn: sqlite3.Connection) -> list[Any]:
            with _immediate(conn):
                args = {
                    "now": self._now(),
                    "max_errors": MAX_ERRORS_KEPT,
                    "worker": worker_id,
                    "why": why,
                }
                return conn.execute(sql.JOB_RECLAIM_WORKER, args).fetchall()

        rows = await self._run("job_reclaim_worker", reclaim)
        if into is not None:
            into += reclaimed_jobs(rows)
        return [r["id"] for r in rows]

    async def job_heartbeat_many(self, params: JobHeartbeatManyParams) -> list[tuple[int, str]]:
        if not params.held:
            return []

        def beat(conn: sqlite3.Connection) -> list[tuple[int, str]]:
            still: list[tuple[int, str]] = []
            with _immediate(conn):
                now = self._now()
                for job_id, token in params.held:
                    args = {
                        "id": job_id,
                        "token": token,
                        "now": now,
                        "default_lease": params.default_lease,
                        "margin": params.lease_margin,
                        "started": (job_id, token) in params.started,
                        "progress": params.progress.get(job_id),
                    }
                    if conn.execute(sql.JOB_HEARTBEAT_MANY, args).rowcount:
                        still.append((job_id, token))
            return still

        return await self._run("job_heartbeat_many", beat)

    async def cron_slot_claim(self, params: CronSlotClaimParams) -> tuple[SlotOutcome, int | None]:
        def claim(conn: sqlite3.Connection) -> tuple[SlotOutcome, int | None]:
            with _immediate(conn):
                return flows.drive(flows.cron_slot(params), self._answerer(conn))

        return await self._run("cron_slot_claim", claim)

    def cron_slot_claim_sync(self, params: CronSlotSyncParams) -> bool:
        conn = _own_sqlite(params.connection)
        slot = params.slot.timestamp()
        with _wrapped("cron_slot_claim"):
            created = params.created.timestamp() if params.created else None
            args = {"schedule": params.schedule, "slot": slot, "created": created}
            if not conn.execute(sql.CRON_SLOT_INSERT_AT, {**args, "now": self._now()}).rowcount:
                return False
        job_id = params.enqueue()  # its errors are the caller's (a Django backend's)
        with _wrapped("cron_slot_claim"):
            args = {"schedule": params.schedule, "slot": slot, "job_id": job_id, "skipped": 0}
            conn.execute(sql.CRON_SLOT_SET_OUTCOME, args)
        return True

    def cron_slots_prune_sync(self, connection: object, before: datetime) -> int:
        conn = _own_sqlite(connection)
        with _wrapped("cron_slots_prune"):
            return conn.execute(sql.CRON_SLOTS_PRUNE, {"before": before.timestamp()}).rowcount

    def job_import_outcome_sync(self, params: JobImportOutcomeParams) -> bool:
        conn = _own_sqlite(params.connection)
        args = {
            "id": params.job_id,
            "state": params.state,
            "attempt": params.attempt,
            "created_at": params.created_at.timestamp(),
            "attempted_at": params.attempted_at.timestamp() if params.attempted_at else None,
            "finished_at": params.finished_at.timestamp(),
            "result": params.result_json,
            "errors": params.errors_json,
            "locked_by": params.locked_by,
        }
        with _wrapped("job_import_outcome"):
            return bool(conn.execute(sql.JOB_IMPORT_OUTCOME, args).rowcount)

    @asynccontextmanager
    async def listen(self, on_wake: Callable[[str], None]) -> AsyncIterator[asyncio.Event]:
        """Wake on any commit to the file by another connection, this process's or another's.

        SQLite has no NOTIFY. ``PRAGMA data_version`` changes when another connection has
        committed, and reading it costs microseconds. Where the OS sends file notifications
        (``sqlite_watch``), a write to the ``-wal`` file makes a thread read it until the
        commit shows, within a fraction of a millisecond; a timer every 100 ms stays on as
        backstop. Elsewhere the timer alone does it: every 5 ms after a change, backing off
        to 100 ms while nothing changes (~0.2 ms of CPU a tick on the benchmark VM). Either
        way the worker wakes every queue: the file does not say which. The yielded event is
        set if the watcher's connection fails.
        """
        lost = asyncio.Event()
        with _wrapped("listen"):
            conn = sqlite3.connect(self.path)
            conn.execute(sql.SCHEMA_PEEK).fetchall()  # a read opens the WAL file to watch
            version = conn.execute(sql.DATA_VERSION).fetchone()[0]
        files = open_wal_watch(self.path, lambda: on_wake("*"))

        def changed() -> bool | None:
            """Whether another commit is visible; None when the connection failed."""
            nonlocal version
            try:
                now = conn.execute(sql.DATA_VERSION).fetchone()[0]
            except sqlite3.OperationalError:
                return False  # busy for a moment (a checkpoint): the next look reads it
            except sqlite3.Error as exc:
                log.warning("SQLite change watcher failed (%s)", exc)
                return None
            if now == version:
                return False
            version = now
            return True

        async def watch() -> None:
            interval = WATCH_BACKSTOP_S if files is not None else WATCH_MIN_S
            while True:
                await asyncio.sleep(interval)
                seen = changed()
                if seen is None:
                    lost.set()
                    return
                if seen:
                    on_wake("*")
                interval = _next_look(files is not None, seen, interval)

        watcher = asyncio.create_task(watch(), name="skiplock-sqlite-watch")
        try:
            yield lost
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if files is not None:
                files.close()
            conn.close()

    @asynccontextmanager
    async def listen_done(
        self, on_done: Callable[[list[int] | None], None]
    ) -> AsyncIterator[asyncio.Event]:
        """The same data_version watch: a commit says something changed, never which jobs."""
        async with self.listen(lambda _queue: on_done(None)) as lost:
            yield lost

    # -- operations a person drives -------------------------------------------------------

    async def job_busiest_keys(
        self, limit: int, queue: str | None = None, task: str | None = None
    ) -> list[KeyLoad]:
        def read(conn: sqlite3.Connection) -> list[Any]:
            args = {"limit": limit, "now": self._now(), "queue": queue, "task": task}
            return conn.execute(sql.JOB_BUSIEST_KEYS, args).fetchall()

        return [key_load(r) for r in await self._run("job_busiest_keys", read)]

    async def job_blocked_keys(self, limit: int) -> list[BlockedKey]:
        def read(conn: sqlite3.Connection) -> list[Any]:
            return conn.execute(sql.JOB_BLOCKED_KEYS, {"limit": limit}).fetchall()

        rows = await self._run("job_blocked_keys", read)
        return [blocked_key(r) for r in rows]

    async def queue_list(self) -> list[QueueInfo]:
        rows = await self._run("queue_list", lambda c: c.execute(sql.QUEUE_LIST).fetchall())
        return [_queue_info(r) for r in rows]

    async def queue_info(self, queue: str) -> QueueInfo:
        row = await self._run(
            "queue_info", lambda c: c.execute(sql.QUEUE_INFO, {"queue": queue}).fetchone()
        )
        return _queue_info(row)

    async def queue_known(self, queue: str) -> bool:
        row = await self._run(
            "queue_known", lambda c: c.execute(sql.QUEUE_KNOWN, {"queue": queue}).fetchone()
        )
        return bool(row[0])

    async def _write(self, operation: str, statement: str, args: Any) -> int:
        def write(conn: sqlite3.Connection) -> int:
            with _immediate(conn):
                return conn.execute(statement, args).rowcount

        return await self._run(operation, write)

    async def queue_set_paused(self, params: QueueSetPausedParams) -> None:
        args = {"name": params.queue, "paused": params.paused, "now": self._now()}
        await self._write("queue_set_paused", sql.QUEUE_SET_PAUSED, args)

    async def queue_set_limits(self, params: QueueSetLimitsParams) -> None:
        args = {
            "name": params.queue,
            "max_depth": params.max_depth,
            "max_running": params.max_running,
            "rate": params.rate_per_s,
            "aging": params.aging_s,
            "now": self._now(),
            "set_depth": "max_depth" in params.given,
            "set_running": "max_running" in params.given,
            "set_rate": "rate_per_s" in params.given,
            "set_aging": "aging_s" in params.given,
        }
        await self._write("queue_set_limits", sql.QUEUE_SET_LIMITS, args)

    async def task_pause(self, params: TaskPauseParams) -> None:
        now = self._now()
        until = None if params.for_s is None else now + params.for_s
        args = {"task": params.task, "until": until, "reason": params.reason, "now": now}
        await self._write("task_pause", sql.TASK_PAUSE, args)

    async def task_resume(self, task: str) -> bool:
        return await self._write("task_resume", sql.TASK_RESUME, {"task": task}) > 0

    async def task_pauses(self) -> list[TaskPause]:
        rows = await self._run(
            "task_pauses", lambda c: c.execute(sql.TASK_PAUSES, {"now": self._now()}).fetchall()
        )
        return [TaskPause(r[0], _opt_dt(r[1]), r[2]) for r in rows]

    async def audit_record(self, params: AuditRecordParams) -> None:
        args = {
            "now": self._now(),
            "who": params.who,
            "what": params.what,
            "target": params.target,
            "detail": params.detail,
        }
        await self._write("audit_record", sql.AUDIT_RECORD, args)

    async def audit_list(self, limit: int, before_id: int | None) -> list[AuditEntry]:
        args = {"limit": limit, "before": before_id}
        rows = await self._run("audit_list", lambda c: c.execute(sql.AUDIT_LIST, args).fetchall())
        return [AuditEntry(r[0], _dt(r[1]), r[2], r[3], r[4], r[5]) for r in rows]

    async def audit_prune(self, age_s: float, batch: int) -> int:
        args = {"before": self._now() - age_s, "batch": batch}
        return await self._write("audit_prune", sql.AUDIT_PRUNE, args)

    async def audit_prune_preview(self, age_s: float) -> int:
        args = {"before": self._now() - age_s}
        rows = await self._run(
            "audit_prune_preview", lambda c: c.execute(sql.AUDIT_PRUNE_PREVIEW, args).fetchall()
        )
        return int(rows[0][0])

    async def job_get(self, job_id: int) -> JobRecord:
        rows = await self._run("job_get", lambda c: ops.records(c, sql.JOB_GET, {"id": job_id}))
        if not rows:
            raise JobNotFound(f"no job with id {job_id}")
        return rows[0]

    async def job_outcome_many(self, job_ids: Sequence[int]) -> list[JobOutcome]:
        if not job_ids:
            return []
        ids = json.dumps(list(job_ids))

        def read(conn: sqlite3.Connection) -> list[JobOutcome]:
            cursor = conn.execute(sql.JOB_OUTCOME_MANY, {"ids": ids})
            names = [d[0] for d in cursor.description]
            return job_outcomes(dict(zip(names, r, strict=True)) for r in cursor.fetchall())

        return await self._run("job_outcome_many", read)

    async def job_count_by_state(self, queue: str | None = None) -> dict[str, int]:
        rows = await self._run(
            "job_count_by_state",
            lambda c: c.execute(sql.JOB_COUNT_BY_STATE, {"queue": queue}).fetchall(),
        )
        return state_counts((state, n) for state, n in rows)

    async def job_count_by_queue(self) -> dict[str, dict[str, int]]:
        rows = await self._run(
            "job_count_by_queue", lambda c: c.execute(sql.JOB_COUNT_BY_QUEUE).fetchall()
        )
        return queue_state_counts(rows)

    async def job_retry(self, params: JobActionParams) -> bool:
        def retry(conn: sqlite3.Connection) -> bool:
            with _immediate(conn):
                # one that ended waiting for its parents waits for them again; any other is
                # requeued as it is (JOB_RETRY leaves the first kind alone)
                flow = wf.retry_unreleased(params.job_id, params.who)
                if flows.drive(flow, self._wf_answers(conn)):
                    return True
                args = {"id": params.job_id, "now": self._now(), "who": params.who}
                history.move_back(conn, params.job_id)  # a day table's job: live again first
                conn.execute(JOB_KEYS_PASSED, args)  # windows that have passed free their keys
                return conn.execute(sql.JOB_RETRY, args).rowcount > 0

        return await self._run("job_retry", retry)

    async def job_cancel(self, params: JobActionParams) -> JobState:
        def cancel(conn: sqlite3.Connection) -> Any:
            with _immediate(conn):
                args = {"id": params.job_id, "now": self._now(), "who": params.who}
                # a job waiting for its parents keeps what their release would give it
                conn.execute(wf_sql.UNRELEASED_KEEP_WAITING, args)
                return conn.execute(sql.JOB_CANCEL, args).fetchone()

        row = await self._run("job_cancel", cancel)
        if row is None:
            return (await self.job_get(params.job_id)).state
        return JobState(row[0])

    async def job_list(self, params: JobListParams) -> list[JobRecord]:
        state = params.state.value if params.state else None
        args = {
            "state": state,
            "limit": params.where.limit,
            "before": params.before_id,
            **ops.filter_params(params.where),
        }
        statement = sql.JOB_LIST_OLDEST if params.oldest_first else sql.JOB_LIST
        return await self._run("job_list", lambda c: ops.records(c, statement, args))

    async def job_count(self, params: JobListParams) -> int:
        state = params.state.value if params.state else None
        args = {"state": state, **ops.filter_params(params.where)}
        row = await self._run("job_count", lambda c: c.execute(sql.JOB_COUNT, args).fetchone())
        return int(row[0])

    async def job_count_states(self, params: JobListParams) -> dict[str, int]:
        state = params.state.value if params.state else None
        args = {"state": state, **ops.filter_params(params.where)}

        def count(conn: sqlite3.Connection) -> dict[str, int]:
            return {str(s): int(n) for s, n in conn.execute(sql.JOB_COUNT_STATES, args)}

        return await self._run("job_count_states", count)

    async def job_find(self, text: str, limit: int) -> list[JobRecord]:
        args = {"text": text, "limit": limit}
        return await self._run("job_find", lambda c: ops.records(c, sql.JOB_FIND, args))

    async def job_dead_groups(self, limit: int) -> list[DeadGroup]:
        def read(conn: sqlite3.Connection) -> list[DeadGroup]:
            cursor = conn.execute(sql.JOB_DEAD_GROUPS, {"limit": limit})
            names = [d[0] for d in cursor.description]
            return [dead_group(dict(zip(names, r, strict=True))) for r in cursor.fetchall()]

        return await self._run("job_dead_groups", read)

    async def _dead_action(
        self, statement: str, params: DeadActionParams, first: str | None = None
    ) -> list[int]:
        def act(conn: sqlite3.Connection) -> list[int]:
            with _immediate(conn):
                if first is not None:
                    conn.execute(first, {"now": self._now()})
                args = {
                    "who": params.who,
                    "now": self._now(),
                    "limit": params.where.limit,
                    **ops.filter_params(params.where),
                }
                return sorted(r[0] for r in conn.execute(statement, args).fetchall())

        return await self._run("dead-letter action", act)

    async def job_requeue_dead(self, params: DeadActionParams) -> list[int]:
        # windows that have passed let their keys go first: a requeued job may take one
        return await self._dead_action(sql.JOB_REQUEUE_DEAD, params, JOB_KEYS_PASSED)

    async def job_discard_dead(self, params: DeadActionParams) -> list[int]:
        return await self._dead_action(sql.JOB_DISCARD_DEAD, params)

    async def cron_last_slots(self) -> dict[str, datetime]:
        rows = await self._run(
            "cron_last_slots", lambda c: c.execute(sql.CRON_LAST_SLOTS).fetchall()
        )
        return {schedule: _dt(at) for schedule, at in rows}

    async def cron_last_runs(self) -> list[CronRun]:
        rows = await self._run("cron_last_runs", lambda c: c.execute(sql.CRON_LAST_RUNS).fetchall())
        return [CronRun(schedule, _dt(at), job_id) for schedule, at, job_id in rows]

    async def cron_slots_prune(self, before: datetime) -> int:
        def prune(conn: sqlite3.Connection) -> int:
            with _immediate(conn):
                return conn.execute(sql.CRON_SLOTS_PRUNE, {"before": before.timestamp()}).rowcount

        return await self._run("cron_slots_prune", prune)

    # -- observability ----------------------------------------------------------------------

    async def job_stats(self, params: JobStatsParams) -> JobStatsRows:
        now = self._now()
        return await self._run("job_stats", lambda c: observe.job_stats(c, params, now))

    async def worker_beat(self, params: WorkerBeatParams) -> None:
        await self._write("worker_beat", sql.WORKER_BEAT, observe.beat_args(params, self._now()))

    async def worker_delete(self, worker_id: str) -> None:
        await self._write("worker_delete", sql.WORKER_DELETE, {"id": worker_id})

    async def worker_prune(self, silent_s: float) -> int:
        args = {"silent_s": silent_s, "now": self._now()}
        return await self._write("worker_prune", sql.WORKER_PRUNE, args)

    async def worker_list(self) -> list[WorkerInfo]:
        def read(conn: sqlite3.Connection) -> list[WorkerInfo]:
            rows = conn.execute(sql.WORKER_LIST, {"now": self._now()}).fetchall()
            return [worker_info(r, _dt) for r in rows]

        return await self._run("worker_list", read)

    # -- workflows (sqlite_workflow_sql.py) -------------------------------------------------

    def _wf_answers(
        self, conn: sqlite3.Connection, woken: set[str] | None = None
    ) -> workflow.Answers:
        return workflow.Answers(
            conn,
            self._now,
            _no_wake if woken is None else woken.update,
            self.max_payload_bytes,
        )

    async def _wf_write(self, operation: str, make: Callable[[], flows.Flow[R]]) -> R:
        """The flow in one write transaction; the queues it made jobs pending in are told to
        this process's workers once it committed (they claim now, not at the file's watch)."""
        woken: set[str] = set()

        def run(conn: sqlite3.Connection) -> R:
            woken.clear()
            with _immediate(conn):
                return flows.drive(make(), self._wf_answers(conn, woken))

        result = await self._run(operation, run)
        self._tell_released(woken)
        return result

    def _tell_released(self, woken: set[str]) -> None:
        if woken and self.on_released is not None:
            self.on_released(woken)

    async def workflow_enqueue(self, plan: Plan, connection: object | None) -> list[int]:
        if connection is not None:
            return self.workflow_enqueue_sync(plan, connection)
        return await self._wf_write("workflow_enqueue", lambda: wf.enqueue_plan(plan))

    def workflow_enqueue_sync(self, plan: Plan, connection: object) -> list[int]:
        """``workflow_enqueue`` on the caller's own sqlite3 connection, in its transaction."""
        own = _own_sqlite(connection)
        with _wrapped("workflow_enqueue"), self._handing_out(own), _savepoint(own):
            return flows.drive(wf.enqueue_plan(plan), self._wf_answers(own))

    async def workflow_open_batch(
        self, on_success: NewJob | None, on_complete: NewJob | None, connection: object | None
    ) -> int:
        if connection is not None:
            own = _own_sqlite(connection)
            flow = wf.open_batch(on_success, on_complete)
            with _wrapped("workflow_open_batch"), self._handing_out(own), _savepoint(own):
                return flows.drive(flow, self._wf_answers(own))
        return await self._wf_write(
            "workflow_open_batch", lambda: wf.open_batch(on_success, on_complete)
        )

    async def workflow_close_batch(self, batch_id: int) -> bool:
        return await self._wf_write("workflow_close_batch", lambda: wf.close_batch(batch_id))

    async def workflow_release(self, parents: Sequence[int]) -> list[int]:
        if not parents:
            return []
        return await self._wf_write("workflow_release", lambda: wf.release(list(parents)))

    async def workflow_after_completion(
        self, finished: Sequence[int], parked: Sequence[int]
    ) -> list[int]:
        return await self._wf_write(
            "workflow_after_completion", lambda: wf.after_completion(finished, parked)
        )

    async def workflow_sweep(self) -> SweepResult:
        async def run(make: Callable[[], flows.Flow[R]]) -> R:
            return await self._wf_write("workflow_sweep", make)

        return await workflow_sweep.sweep(run)

    async def workflow_expire_waits(self) -> list[int]:
        return await self._wf_write("workflow_expire_waits", wf.expire_waits)

    async def workflow_next_wait_timeout(self) -> float | None:
        row = await self._run(
            "workflow_next_wait_timeout",
            lambda c: c.execute(wf_sql.WAIT_NEXT_TIMEOUT, {"now": self._now()}).fetchone(),
        )
        return None if row is None or row[0] is None else float(row[0])

    async def workflow_abort_batch(self, batch_id: int, error_json: str) -> bool:
        return await self._wf_write(
            "workflow_abort_batch", lambda: wf.abort_batch(batch_id, error_json)
        )

    async def workflow_wait_prepare(self, job_id: int, token: str, name: str, seq: int) -> bool:
        args = {"id": job_id, "token": token, "name": name, "seq": seq, "now": self._now()}

        def prepare(conn: sqlite3.Connection) -> bool:
            with _immediate(conn):
                return conn.execute(wf_sql.WAIT_PREPARE, args).fetchone() is not None

        return await self._run("workflow_wait_prepare", prepare)

    async def workflow_signal(
        self, job_id: int, name: str, payload_json: str | None, who: str, kept_most: int
    ) -> SignalReceipt:
        woken: list[str] = []
        sent = workflow.Signal(job_id, name, payload_json, who, kept_most)

        def send(conn: sqlite3.Connection) -> SignalReceipt:
            woken.clear()
            with _immediate(conn):
                receipt, queue = workflow.signal(conn, sent, self._now())
                woken.extend([queue] if queue is not None else [])
                return receipt

        receipt = await self._run("workflow_signal", send)
        self._tell_released(set(woken))
        return receipt

    async def workflow_signal_take(self, job_id: int, name: str, seq: int) -> StoredSignal | None:
        return await self._run(
            "workflow_signal_take", lambda c: workflow.take_signal(c, job_id, name, seq)
        )

    async def workflow_step_get(self, job_id: int, name: str, seq: int) -> tuple[bool, str | None]:
        row = await self._run(
            "workflow_step_get",
            lambda c: c.execute(wf_sql.STEP_GET, (job_id, name, seq)).fetchone(),
        )
        return (False, None) if row is None else (True, row[0])

    async def workflow_step_put(
        self, job_id: int, token: str, name: str, seq: int, result_json: str | None
    ) -> bool:
        args = {"id": job_id, "token": token, "name": name, "seq": seq, "result": result_json}

        def put(conn: sqlite3.Connection) -> bool:
            with _immediate(conn):
                return bool(conn.execute(wf_sql.STEP_PUT, {**args, "now": self._now()}).rowcount)

        return await self._run("workflow_step_put", put)

    async def workflow_parent_results(
        self, job_id: int
    ) -> list[tuple[int, str | None, str | None]]:
        rows = await self._run(
            "workflow_parent_results",
            lambda c: c.execute(wf_sql.PARENT_RESULTS, (job_id,)).fetchall(),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def workflow_links(
        self, job_id: int, children_limit: int, parents_limit: int
    ) -> JobLinks:
        def read(conn: sqlite3.Connection) -> JobLinks:
            parents = conn.execute(wf_sql.JOB_PARENTS, (job_id, parents_limit)).fetchall()
            counts = conn.execute(wf_sql.JOB_PARENT_COUNTS, (job_id,)).fetchall()
            children = conn.execute(wf_sql.JOB_CHILDREN, (job_id, 0, children_limit)).fetchall()
            wait = conn.execute(wf_sql.JOB_WAIT, (job_id,)).fetchone()
            batch = conn.execute(wf_sql.JOB_BATCH, {"id": job_id}).fetchone()
            batch_id = None if batch is None else batch[0]
            return job_links(parents, children, wait, batch_id, counts)

        return await self._run("workflow_links", read)

    async def workflow_linked(
        self, job_id: int, parents: bool, after: int, limit: int
    ) -> list[LinkedJob]:
        statement = wf_sql.JOB_PARENTS_AFTER if parents else wf_sql.JOB_CHILDREN
        rows = await self._run(
            "workflow_linked", lambda c: c.execute(statement, (job_id, after, limit)).fetchall()
        )
        return linked_jobs(rows)

    async def workflow_batch_info(self, batch_id: int) -> BatchInfo:
        row = await self._run(
            "workflow_batch_info", lambda c: c.execute(wf_sql.BATCH_INFO, (batch_id,)).fetchone()
        )
        if row is None:
            raise JobNotFound(f"batch {batch_id}: no such batch")
        return batch_info(row)

    async def workflow_waiting(self, limit: int) -> list[WaitingJob]:
        rows = await self._run(
            "workflow_waiting", lambda c: c.execute(wf_sql.WAITING_LIST, (limit,)).fetchall()
        )
        return [waiting_job(r) for r in rows]

    async def workflow_graph(self, job_id: int, most: int) -> WorkflowGraph:
        return await self._run(
            "workflow_graph",
            lambda conn: flows.drive(wf.graph(job_id, most), self._wf_answers(conn)),
        )

    async def workflow_prune(self, most: int) -> int:
        def prune(conn: sqlite3.Connection) -> int:
            with _immediate(conn):
                conn.execute(wf_sql.BATCH_MEMBERS_PRUNED, {"most": most})  # not a row pruned
                return sum(
                    conn.execute(statement, {"most": most}).rowcount
                    for statement in wf_sql.WORKFLOW_PRUNE
                )

        return await self._run("workflow_prune", prune)


@contextlib.contextmanager
def _savepoint(conn: sqlite3.Connection) -> Iterator[None]:
    """All of a workflow or none on the caller's connection: a savepoint inside its
    transaction (or, outside one, a transaction of its own that the release commits). A
    connection that begins its transactions implicitly (sqlite3's default: the caller's
    commit or rollback decides, as for the statements it runs itself) is begun first, as
    sqlite3 would before the caller's first write: the savepoint is then the caller's."""
    if not conn.in_transaction and conn.isolation_level is not None:
        conn.execute(f"BEGIN {conn.isolation_level}")
    conn.execute("SAVEPOINT skiplock_workflow")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO skiplock_workflow")
        conn.execute("RELEASE skiplock_workflow")
        raise
    conn.execute("RELEASE skiplock_workflow")


def _no_wake(_queues: set[str]) -> None:
    """SQLite's workers see every commit through the file's data-version watch."""
