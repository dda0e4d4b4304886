"""PostgreSQL through asyncpg: a pool for work, one for claims, a dedicated connection for LISTEN.

asyncpg over psycopg 3 because it was faster on the claim/complete loop measured here (binary
protocol, prepared statements cached per connection); psycopg connections are still accepted
for transactional enqueue, which runs the same statement through them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

import asyncpg

from .._job import (
    AuditEntry,
    BlockedKey,
    ClaimedJob,
    Completion,
    CronRun,
    DeadGroup,
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
    SignalOutcome,
    SignalReceipt,
    StoredSignal,
    WaitingJob,
    WorkflowGraph,
)
from ..errors import BackendError, ConfigurationError, JobNotFound, QueueFull
from . import flows, postgres_url, workflow_sweep
from . import postgres_holders as holders
from . import postgres_observe as observe
from . import postgres_ops as ops
from . import postgres_reads as reads
from . import postgres_rotation as rotation
from . import postgres_sql as sql
from . import postgres_storage as storage
from . import postgres_workflow as workflow
from . import workflow_flows as wf
from .base import (
    HOLD_MIN_S,
    MAX_ERRORS_KEPT,
    NEXT_RUN_PRIORITIES,
    RELEASED_BY_SUPERVISOR,
    AuditRecordParams,
    ClaimParams,
    Clock,
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
from .common import (
    FINAL_STATES,
    KEY_TURNS_SLICE,
    KeyCursors,
    batch_info,
    blocked_key,
    dead_group,
    job_links,
    job_outcomes,
    job_record,
    key_load,
    linked_jobs,
    mailbox_full,
    queue_state_counts,
    reclaimed_jobs,
    signal_taken,
    state_counts,
    stored_signal,
    waiting_job,
    worker_info,
)
from .postgres_errors import CONNECTION_ERRORS, connecting, retry_moved
from .postgres_errors import wrapped as _wrapped
from .postgres_ops import COPY_MIN_ROWS
from .postgres_url import parse_postgres_url
from .postgres_workflow_sql import RELEASE_CHUNK, WorkflowStatements
from .workflow_plan import Plan, SweepResult

PRICED_OUT = {"jit": "off"}
"""What every session that prices a plan shape out also sets: a plan that must keep a priced-out
node anyway (the queue-restricted claim sorts its few queues' heads) costs over ten billion,
past ``jit_above_cost``, and PostgreSQL then compiled it: 620 ms for a claim of 4 jobs,
measured (a worker whose sessions were killed every 0.4 s never claimed again)."""

SORT_OFF_IN_TRANSACTION = "SET LOCAL enable_sort = off; SET LOCAL jit = off"
"""The claim sessions' ``enable_sort = off`` and ``jit = off`` (see ``open``) for one transaction,
behind a pooler."""

SEQSCAN_OFF_IN_TRANSACTION = "SET LOCAL enable_seqscan = off; SET LOCAL jit = off"
"""The outcome sessions' ``enable_seqscan = off`` (see ``open``), likewise."""

MAX_AGE_S = 100 * 365 * 86400.0
PREPARE_AT_ONCE = 0
"""psycopg's ``prepare_threshold`` while a caller's connection runs a statement prepared on
purpose (``prepare=True`` is ignored while the threshold is None, Django's default)."""
"""A retention past which no history partition is dropped (and no date overflows)."""

R = TypeVar("R")

log = logging.getLogger("skiplock")

WORKFLOW_TRIES = 5
"""How often a workflow transaction that PostgreSQL broke off to end a deadlock is run again."""

SMALL_OUTCOME_BATCH = 4
"""Up to how many outcomes a batch is written on the generic plan's session (see ``open``)."""

OWN_NOTIFY_S = 2.0
"""How long the NOTIFY of a release of ours is expected (it comes at the commit)."""


DEFAULT_CONNECT_TIMEOUT_S = postgres_url.DEFAULT_CONNECT_TIMEOUT_S


def _address(dsn: str) -> str:
    """host:port for messages (the driver's defaults where the URL names none)."""
    parts = urlsplit(dsn)
    try:
        port = parts.port or 5432
    except ValueError:  # several hosts, or a port the driver will refuse itself
        return parts.netloc.rsplit("@", 1)[-1] or "localhost:5432"
    return f"{parts.hostname or 'localhost'}:{port}"


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Return a connection to skiplock's pools as it is. asyncpg's default reset sends
    ``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`` on every release: a round
    trip for each enqueue, claim and completion (a third of a one-by-one enqueue, measured).
    Nothing here needs it: these pools are private, their only session settings are the
    ones they were opened with, LISTEN has its own connection, the one advisory lock is
    transaction-scoped, and asyncpg still rolls back a transaction left open."""


class _Retrying:
    """A pool's fetch and fetchval through ``retry_moved``."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def fetch(self, statement: str, *args: Any) -> list[Any]:
        return await retry_moved(lambda: self._pool.fetch(statement, *args))

    async def fetchval(self, statement: str, *args: Any) -> Any:
        return await retry_moved(lambda: self._pool.fetchval(statement, *args))


def _begins_implicitly(connection: object) -> bool:
    """A psycopg connection outside autocommit and idle: its transaction begins at the next
    statement and is the caller's to commit or roll back. ``transaction()`` on it would
    begin one of its own and commit it; one trivial statement first makes it the caller's,
    and ``transaction()`` a savepoint inside (asyncpg has no implicit transaction)."""
    if getattr(connection, "autocommit", True):
        return False
    info = getattr(connection, "info", None)
    return getattr(info, "transaction_status", None) == 0  # psycopg's TransactionStatus.IDLE


@dataclasses.dataclass(slots=True)
class _Written:
    """What completion statements wrote: their rows (one a job written), whether they were
    looked for in given segments, and what is left to workflows: the queues the statement's
    own release woke, the children it left at zero for a newer snapshot, and the jobs whose
    children are (still) to release."""

    rows: list[Any]
    segments_given: bool
    woken: set[str] = dataclasses.field(default_factory=set)
    stale: list[int] = dataclasses.field(default_factory=list)
    release_later: list[int] = dataclasses.field(default_factory=list)

    def add(self, more: _Written) -> None:
        self.rows += more.rows
        self.woken |= more.woken
        self.stale += more.stale
        self.release_later += more.release_later


class PostgresBackend:
    """The Backend protocol on PostgreSQL."""

    supports_push = True
    vacuums_hot = True
    keeps_wal = False

    def __init__(self, url: str, *, clock: Clock | None = None, pool_size: int = 10) -> None:
        self.url = url
        parsed = parse_postgres_url(url)
        self._dsn, self.schema, self.pooled = parsed.dsn, parsed.schema, parsed.pooled
        self.connect_timeout_s = parsed.connect_timeout_s
        self._driver: dict[str, Any] = (
            {"servicefile": parsed.servicefile} if parsed.servicefile else {}
        )
        """Keywords every connection of ours is opened with (the service file to read)."""
        self._listen_dsn = parsed.listen_dsn
        # Behind a transaction pooler with no direct connection to LISTEN on: poll-only.
        self.supports_push = self._listen_dsn is not None
        self._clock = clock
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._claim_pool: asyncpg.Pool | None = None
        self._by_id_pool: asyncpg.Pool | None = None
        self._by_id_small_pool: asyncpg.Pool | None = None
        self._rest_pool: asyncpg.Pool | None = None
        self._reads = reads.Reads(lambda: self.pool, lambda: self.rest_pool, self.schema)
        """A person's reads: short, and on the live segments for a moment (postgres_reads)."""
        self.channel = f"skiplock_{self.schema}"
        self.done_channel = f"skiplock_done_{self.schema}"
        """Where completions announce the ids they finished (waiters LISTEN here)."""
        # Name our sessions in pg_stat_activity unless the URL names them itself.
        named = "application_name=" in self._dsn
        self._settings = {} if named else {"application_name": "skiplock"}
        self._sql = sql.Statements.for_schema(self.schema)
        self._key_cursors: KeyCursors = {}
        """Where each keyed claim's walk starts next (postgres_ops.claim_keyed)."""
        self._turns_after: str | None = None
        """Where the upkeep's next look for stale key turn rows starts (None: the first)."""
        self._wakers: list[Callable[[str], None]] = []
        """What each LISTEN of ours wakes (a NOTIFY held while a release ran, passed on)."""
        self._held_notifies: dict[int, list[str]] = {}
        """Session pid -> the NOTIFYs it sent while a release of ours runs on it."""
        self._own_notifies: dict[tuple[int, str], float] = {}
        """(session pid, queue) -> until when (monotonic): the NOTIFYs of our own releases,
        which this process's workers were told of already (``_settle_own_notifies``)."""
        self.on_released: Callable[[set[str]], None] | None = None
        """Told the queues a workflow release of ours made jobs pending in (a worker wakes
        its producer: no wait for the NOTIFY's round trip)."""
        self.max_payload_bytes = DEFAULT_MAX_PAYLOAD_BYTES
        """The most bytes a release gives a child as the list of its parents' results (the
        App's ``max_payload_bytes``, set by ``App.new_backend``): a chord's body over it is
        buried (dead, PayloadTooLarge), never run with a value jsonb refuses past 256 MiB."""

    def _now(self) -> datetime | None:
        return self._clock() if self._clock else None

    async def _by_id(self, statement: str, *args: Any) -> list[Any]:
        """``statement`` (one that locks and writes job rows by id) with sequential scans
        priced out: on its own sessions, or behind a transaction pooler in a transaction of
        its own with SET LOCAL (two round trips more); run again on a moved row."""
        if self._by_id_pool is not None:
            pool = self._by_id_pool
            return await retry_moved(lambda: pool.fetch(statement, *args))

        async def in_transaction() -> list[Any]:
            async with self.pool.acquire() as conn, conn.transaction():
                await conn.execute(SEQSCAN_OFF_IN_TRANSACTION)
                rows: list[Any] = await conn.fetch(statement, *args)
                return rows

        return await retry_moved(in_transaction)

    @property
    def _retrying(self) -> _Retrying:
        """The pool's fetches, run again where they meet a row moved between partitions (the
        operations that lock job rows: postgres_errors.moved)."""
        return _Retrying(self.pool)

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise BackendError("the PostgreSQL backend is not open")
        return self._pool

    @property
    def rest_pool(self) -> asyncpg.Pool:
        """The sessions a split read reads the history on (postgres_reads.Reads.split)."""
        if self._rest_pool is None:
            raise BackendError("the PostgreSQL backend is not open")
        return self._rest_pool

    async def open(self, *, create: bool = False) -> None:  # a server's database: never made
        if self._pool is not None:
            return
        with _wrapped("connect"), self._connecting():
            # min_size 0: asyncpg keeps a nonzero floor by reconnecting in the background
            # and logs a traceback for each failed try, which during an outage buried the
            # worker's one line per state change. The first query below opens a connection
            # (so open() still proves the server answers), and it stays pooled once idle.
            pool = await asyncpg.create_pool(
                self._dsn,
                min_size=0,
                max_size=self._pool_size,
                server_settings=self._settings,
                # Behind a transaction pooler a statement prepared by name on one server
                # session is missing on the next; unnamed statements live inside one exchange.
                statement_cache_size=0 if self.pooled else 100,
                timeout=self.connect_timeout_s,
                **self._driver,
                reset=_keep_session,
            )
            try:
                await pool.fetchval("SELECT 1")
            except BaseException:
                pool.terminate()  # nothing to wait for: a stop may be cancelling us
                raise
            self._pool = pool
            # The history's side of a person's read (postgres_reads.Reads.split): two sessions
            # at most, opened when a reading first needs one, taken before the main pool's.
            self._rest_pool = await asyncpg.create_pool(
                self._dsn,
                min_size=0,
                max_size=2,
                server_settings=self._settings,
                statement_cache_size=0 if self.pooled else 100,
                timeout=self.connect_timeout_s,
                **self._driver,
                reset=_keep_session,
            )
            if self.pooled:
                return  # no session settings there: the claim sets enable_sort per transaction
            # The all-queues claim's sessions (opened on first claim). A queue table's
            # statistics lag behind a flood: planned from stats that still say "few pending",
            # the claim reads and sorts the whole backlog (43 ms a claim at 100,000 pending,
            # measured) where the pending index already holds the order and LIMIT stops after
            # a batch (1.4 ms). With sorting priced out, the ordered index scan is the plan
            # whatever the statistics say. The queue-restricted claims run here too: each
            # queue's slice of the live segments is a merge of ordered index scans, which lagging
            # statistics would otherwise trade for reading the queue whole and sorting it.
            self._claim_pool = await asyncpg.create_pool(
                self._dsn,
                min_size=0,
                max_size=2,
                server_settings={**self._settings, **PRICED_OUT, "enable_sort": "off"},
                timeout=self.connect_timeout_s,
                **self._driver,
                reset=_keep_session,
            )
            # The outcome batches' and heartbeats' sessions: they lock and write given ids of
            # the live partition, whose statistics price a sequential scan of it below 500
            # primary-key probes once it holds ~50,000 rows (a flood's backlog, its dead
            # tuples): measured 16 ms a batch by the scan against 0.6 ms by the key, and under
            # a flood the completer fell behind by 50,000 outcomes. With scans priced out the
            # key is the plan whatever the statistics say. Custom plans only: the generic plan
            # a prepared statement settles on after five runs took 200 ms a batch of 500
            # outcomes at a 100,000-job backlog where the custom one takes 18 ms (planning
            # included) - PostgreSQL plans an UPDATE of a partitioned table blind to its ids.
            settings = {
                **PRICED_OUT,
                "enable_seqscan": "off",
                "plan_cache_mode": "force_custom_plan",
            }
            self._by_id_pool = await asyncpg.create_pool(
                self._dsn,
                min_size=0,
                max_size=3,
                server_settings={**self._settings, **settings},
                timeout=self.connect_timeout_s,
                **self._driver,
                reset=_keep_session,
            )
            # A small batch of outcomes (an idle worker's one job, a chain's link) on a session
            # of its own with the generic plan: planning the completion statement is most of
            # what a custom plan costs one outcome (1.2 ms against 0.6 ms generic, one outcome
            # at a 100,000-job backlog; 1.8 against 0.75 ms four), and with scans priced out
            # the generic plan probes the keys of each live segment, which for a few ids is
            # what the custom one does (the 200 ms above is a batch of 500).
            self._by_id_small_pool = await asyncpg.create_pool(
                self._dsn,
                min_size=0,
                max_size=1,
                server_settings={
                    **self._settings,
                    **settings,
                    "plan_cache_mode": "force_generic_plan",
                },
                timeout=self.connect_timeout_s,
                **self._driver,
                reset=_keep_session,
            )

    def _connecting(self) -> contextlib.AbstractContextManager[None]:
        return connecting(_address(self._dsn), self.connect_timeout_s)

    async def close(self) -> None:
        pools = (
            self._pool,
            self._rest_pool,
            self._claim_pool,
            self._by_id_pool,
            self._by_id_small_pool,
        )
        self._pool = self._rest_pool = self._claim_pool = None
        self._by_id_pool = self._by_id_small_pool = None
        for pool in pools:
            if pool is not None:
                await pool.close()

    async def migrate(self) -> list[int]:
        applied: list[int] = []
        with _wrapped("migrate"):
            async with self.pool.acquire() as conn, conn.transaction():
                # The lock first (its key is the schema's name, which need not exist yet):
                # concurrent CREATE SCHEMA IF NOT EXISTS race on pg_namespace's unique index.
                await conn.execute(self._sql.MIGRATIONS_LOCK, self.schema)
                await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                await conn.execute(self._sql.MIGRATIONS_TABLE)
                done = {r["version"] for r in await conn.fetch(self._sql.MIGRATION_VERSIONS)}
                for migration in sql.MIGRATIONS:
                    if migration.version not in done:
                        await conn.execute(migration.body.replace("{s}", f'"{self.schema}"'))
                        await conn.execute(
                            self._sql.MIGRATION_RECORD, migration.version, migration.name
                        )
                        applied.append(migration.version)
        await self._make_ahead("migrate", analyze=False)  # before the first job finishes
        return applied

    async def schema_version(self) -> tuple[int, int]:
        latest = sql.MIGRATIONS[-1].version
        with _wrapped("schema_version"):
            quoted = f'"{self.schema}"'
            if not await self.pool.fetchval(self._sql.MIGRATIONS_TABLE_EXISTS, quoted):
                return 0, latest
            current = await self.pool.fetchval(self._sql.SCHEMA_VERSION)
        return int(current), latest

    async def job_insert_many(self, params: JobInsertManyParams) -> list[int]:
        jobs, connection = params.jobs, params.connection
        if not jobs:
            return []
        insert, lookup = self._sql.JOB_INSERT_MANY, self._sql.JOB_LIVE_BY_UNIQUE_KEY
        with _wrapped("job_insert_many"):
            if connection is None:
                async with self.pool.acquire() as conn:
                    # one job needs no transaction: each step of a replace stands alone
                    # (and a DuplicateJob wrote nothing); a batch rolls back as one
                    if len(jobs) == 1 and jobs[0].on_duplicate == "replace":
                        return [await self._replace_one(conn, jobs[0])]
                    if len(jobs) == 1 or not any(j.on_duplicate != "return" for j in jobs):
                        return await self._insert_asyncpg(conn, jobs)
                    async with conn.transaction():
                        return await self._insert_asyncpg(conn, jobs)
            if isinstance(connection, asyncpg.Connection | asyncpg.pool.PoolConnectionProxy):
                return await self._insert_asyncpg(connection, jobs)
        values = ops.insert_params(jobs, self.channel, self._now())
        named = {f"p{i}": v for i, v in enumerate(values, 1)}
        cursor = await connection.execute(ops.to_psycopg(insert), named)  # type: ignore[attr-defined]
        rows = await cursor.fetchall()
        keys = ops.missing_keys(jobs, rows)
        live: list[Any] = []
        if keys:
            named = {"p1": keys[0], "p2": keys[1]}
            cursor = await connection.execute(ops.to_psycopg(lookup), named)  # type: ignore[attr-defined]
            live = await cursor.fetchall()
        held: list[int] = []
        ids = ops.finish_insert(jobs, rows, live, held)
        for i in held:
            flow = flows.replace_held(jobs[i], ids[i])
            ids[i] = await flows.drive_async(flow, self._psycopg_answers(connection))
        return ids

    async def _insert_asyncpg(self, conn: Any, jobs: Sequence[NewJob]) -> list[int]:
        if len(jobs) >= COPY_MIN_ROWS and not any(j.unique_key or j.concurrency_key for j in jobs):
            return await self._copy_asyncpg(conn, jobs)
        params = ops.insert_params(jobs, self.channel, self._now())
        rows = [tuple(r) for r in await conn.fetch(self._sql.JOB_INSERT_MANY, *params)]
        keys = ops.missing_keys(jobs, rows)
        live = await conn.fetch(self._sql.JOB_LIVE_BY_UNIQUE_KEY, *keys) if keys else []
        held: list[int] = []
        ids = ops.finish_insert(jobs, rows, [tuple(r) for r in live], held)
        for i in held:
            flow = flows.replace_held(jobs[i], ids[i])
            ids[i] = await flows.drive_async(flow, self._asyncpg_answers(conn))
        return ids

    async def _replace_one(self, conn: Any, job: NewJob) -> int:
        """One ``replace`` job: its pending holder replaced first (``flows.replace_first``:
        a burst of debounced enqueues costs one statement each), else inserted."""
        return await flows.drive_async(flows.replace_first(job), self._asyncpg_answers(conn))

    def _asyncpg_answers(self, conn: Any) -> Callable[[object], Awaitable[Any]]:
        """``flows.replace_held``'s steps on an asyncpg connection, each in a savepoint (or
        alone, outside a transaction): a row a finish moved meanwhile fails the step alone
        (RACE_LOST), which then did nothing."""

        async def answer(step: object) -> Any:
            statement, args, read = ops.replace_step(step, self._sql, self._now(), self.channel)
            rows: list[Any] = []
            with ops.unless_race_lost():
                if not conn.is_in_transaction():  # a statement alone: its failure ends there
                    rows = await conn.fetch(statement, *args)
                else:
                    async with conn.transaction():
                        rows = await conn.fetch(statement, *args)
            return read(rows)

        return answer

    def _psycopg_answers(self, conn: Any) -> Callable[[object], Awaitable[Any]]:
        """``_asyncpg_answers`` on a caller's psycopg async connection."""

        async def answer(step: object) -> Any:
            statement, named, read = ops.psycopg_step(step, self._sql, self._now(), self.channel)
            rows: list[Any] = []
            with ops.unless_race_lost():
                async with conn.transaction():
                    cursor = await conn.execute(statement, named)
                    rows = await cursor.fetchall()
            return read(rows)

        return answer

    def _psycopg_sync_answers(self, conn: Any) -> Callable[[object], Any]:
        """``_psycopg_answers`` on a caller's synchronous psycopg connection."""

        def answer(step: object) -> Any:
            statement, named, read = ops.psycopg_step(step, self._sql, self._now(), self.channel)
            rows: list[Any] = []
            with ops.unless_race_lost(), conn.transaction():
                rows = conn.execute(statement, named).fetchall()
            return read(rows)

        return answer

    async def _copy_asyncpg(
        self, conn: Any, jobs: Sequence[NewJob], waiting: Sequence[bool] = ()
    ) -> list[int]:
        """A large batch by COPY: ids drawn first, since COPY returns none; the jobs
        ``waiting`` flags (a workflow's) written as waiting.

        COPY writes rows about twice as fast as ``INSERT ... SELECT FROM unnest`` (10,000 no-op
        jobs: ~45 ms against ~100 ms here). Its transaction is a savepoint inside the caller's,
        so a full queue or a failed COPY leaves nothing behind, NOTIFY included.
        """
        per_queue = collections.Counter(j.queue for j in jobs)
        async with conn.transaction():
            row = await conn.fetchrow(
                self._sql.JOB_COPY_PREPARE,
                list(per_queue),
                list(per_queue.values()),
                len(jobs),
                self.channel,
                self._now(),
            )
            if row["full"]:
                raise QueueFull(
                    f"queue {', '.join(map(repr, row['full']))} is at its max_depth: "
                    "nothing was enqueued"
                )
            ids: list[int] = row["ids"]
            now: datetime = row["now"]
            records: list[tuple[Any, ...]] = [
                (
                    job_id,
                    j.task,
                    j.queue,
                    j.args_json,
                    j.kwargs_json,
                    j.priority,
                    j.max_attempts,
                    j.run_at or (now + timedelta(seconds=j.run_after_s) if j.run_after_s else now),
                    j.timeout,
                    j.correlation_id,
                    j.lease_s,
                    j.trace_context,
                    j.payload_version,
                    row["segment"],
                )
                for job_id, j in zip(ids, jobs, strict=True)
            ]
            columns = sql.COPY_COLUMNS.split()
            if any(waiting):
                columns.append("state")
                states = ("pending", "waiting")
                records = [(*r, states[w]) for r, w in zip(records, waiting, strict=True)]
            await conn.copy_records_to_table(
                "skiplock_jobs", schema_name=self.schema, columns=columns, records=records
            )
        return ids

    def job_insert_many_sync(self, params: JobInsertManyParams) -> list[int]:
        jobs, connection = params.jobs, params.connection
        if not jobs:
            return []
        if connection is None:
            raise TypeError("connection: job_insert_many_sync needs the caller's connection")
        values = ops.insert_params(jobs, self.channel, self._now())
        execute: Callable[..., Any] = connection.execute  # type: ignore[attr-defined]
        rows = self._insert_prepared(connection, values)
        keys = ops.missing_keys(jobs, rows)
        live = []
        if keys:
            lookup = ops.to_psycopg(self._sql.JOB_LIVE_BY_UNIQUE_KEY)
            live = execute(lookup, {"p1": keys[0], "p2": keys[1]}).fetchall()
        held: list[int] = []
        ids = ops.finish_insert(jobs, rows, live, held)
        for i in held:
            flow = flows.replace_held(jobs[i], ids[i])
            ids[i] = flows.drive(flow, self._psycopg_sync_answers(connection))
        return ids

    def _insert_prepared(self, connection: Any, values: list[Any]) -> list[Any]:
        """JOB_INSERT_MANY on a caller's psycopg connection, bound on the server and prepared
        once per session, as skiplock's own sessions run it.

        Django's connections bind on the client (its default cursor) and prepare nothing
        (``prepare_threshold=None``, for PgBouncer's sake), so the server parsed and planned
        this statement at every enqueue: ~1.7 ms of each, 5x django-tasks-db's one-row INSERT.
        Here it is prepared for this one statement (psycopg's threshold is lifted around it and
        put back: the project's other queries keep the project's setting); psycopg forgets it
        at a rollback and prepares it again. Behind a transaction pooler (the URL's
        ``pooler=transaction``) nothing is prepared, as for skiplock's own sessions: a statement
        prepared on one server session is missing on the next. psycopg's ``RawCursor`` takes
        the statement's ``$1`` placeholders as written (a cursor of psycopg's own placeholders
        re-parses a statement this long at every call to convert them)."""
        if self.pooled or not hasattr(connection, "prepare_threshold"):
            named = {f"p{i}": v for i, v in enumerate(values, 1)}
            statement = ops.to_psycopg(self._sql.JOB_INSERT_MANY)
            return list(connection.execute(statement, named).fetchall())
        from psycopg import RawCursor

        threshold = connection.prepare_threshold
        connection.prepare_threshold = PREPARE_AT_ONCE
        try:
            with RawCursor(connection) as cursor:
                cursor.execute(self._sql.JOB_INSERT_MANY, values, prepare=True)
                return cursor.fetchall()
        finally:
            connection.prepare_threshold = threshold

    async def job_get_available(self, params: ClaimParams) -> list[ClaimedJob]:
        # All queues: one ordered walk of the pending index; some queues: a walk of each
        # queue's slice of the per-queue index. Both on the sessions that price sorts out (see
        # _connect): the live partition's segments are read by a merge of their ordered index
        # scans, which a plan from lagging statistics would replace by reading a whole queue
        # and sorting it.
        with _wrapped("job_get_available"):
            if params.queues is None:
                rows = await self._claim_sorted(self._sql.JOB_GET_AVAILABLE, params)
            else:
                rows = await self._claim_sorted(self._sql.JOB_GET_AVAILABLE_IN_QUEUES, params)
        return ops.claimed_in_order(rows)

    async def _claim_sorted(self, statement: str, params: ClaimParams) -> list[Any]:
        args = (*self._claim_args(params, None), False)
        if not self.pooled:
            pool = self._claim_pool or self.pool
            return await retry_moved(lambda: pool.fetch(statement, *args))

        # Behind a transaction pooler a session setting would leak to whoever gets the server
        # session next, so the claim prices sorts out in its own transaction: BEGIN and SET
        # LOCAL and COMMIT cost three round trips more (benchmarks/HISTORY.md, "Behind PgBouncer").
        async def claim() -> list[Any]:
            async with self.pool.acquire() as conn, conn.transaction():
                await conn.execute(SORT_OFF_IN_TRANSACTION)
                rows: list[Any] = await conn.fetch(statement, *args)
                return rows

        return await retry_moved(claim)

    def _claim_args(self, params: ClaimParams, queue: str | None) -> list[Any]:
        queues = [queue] if queue else params.queues
        if queues is not None:
            queues = list(dict.fromkeys(queues))  # a queue named twice would count twice
        return [
            queues,
            params.limit,
            params.worker,
            params.lease_token,
            params.default_lease,
            params.lease_margin,
            self._now(),
        ]

    async def job_get_available_limited(self, params: ClaimParams) -> list[ClaimedJob]:
        # The claim of a limited queue is the queue-restricted claim's statement, so it runs
        # where sorts are priced out too (a plan from lagging statistics read a flooded
        # queue whole and sorted it): on the claim sessions, or behind a pooler with the
        # settings for this transaction alone.
        pool = self._claim_pool  # None behind a pooler

        async def claim() -> list[Any]:
            async with (pool or self.pool).acquire() as conn, conn.transaction():
                if pool is None:
                    await conn.execute(SORT_OFF_IN_TRANSACTION)
                flow = flows.limited_claim(params)
                return await flows.drive_async(flow, self._answers(conn))

        with _wrapped("job_get_available_limited"):
            rows = await retry_moved(claim)
        return ops.claimed_in_order(rows)

    async def job_get_available_keyed(self, params: ClaimParams) -> list[ClaimedJob]:
        # One statement, autocommit: its key locks last as long as it does (behind a pooler
        # too). On the ordinary sessions: it sorts a few rows by design (the claim sessions'
        # enable_sort = off made a claim of 16 take 2 s), and its walk keeps to its index
        # by settings of its own (skiplock_key_walk).
        pool = self.pool

        async def claim() -> list[Any]:
            async with pool.acquire() as conn:
                return await ops.claim_keyed(
                    conn, self._sql, self._claim_args, params, False, self._key_cursors
                )

        with _wrapped("job_get_available_keyed"):
            rows = await retry_moved(claim)
        return ops.keyed_in_order(rows)

    async def queue_limited(self) -> list[str]:
        with _wrapped("queue_limited"):
            return [r["name"] for r in await self._retrying.fetch(self._sql.QUEUE_LIMITED)]

    async def job_next_run_at(self, lookback_s: float = 0.0) -> float | None:
        with _wrapped("job_next_run_at"):
            sql, most = self._sql.JOB_NEXT_RUN_AT, NEXT_RUN_PRIORITIES
            seconds: float | None = await self.pool.fetchval(
                sql, self._now(), most, max(lookback_s, 0.0)
            )
        return seconds

    async def job_ready_exists(self, queues: tuple[str, ...] | None) -> bool:
        with _wrapped("job_ready_exists"):
            names = None if queues is None else list(queues)
            found: bool = await self.pool.fetchval(self._sql.JOB_READY_EXISTS, names, self._now())
        return found

    def _answers(self, conn: Any) -> ops.Answers:
        return ops.Answers(
            conn, self._sql, self._claim_args, self._now(), self.channel, self._key_cursors
        )

    async def warm_up(self) -> None:
        # Measured at a worker's start: the first claim paid ~10 ms to open the claim session
        # and the first completion ~10 ms to prepare its statement and introspect its array
        # types, inside the first jobs' latency. Run each hot statement once, touching no row,
        # on the claim session, on an outcome session (its own pool where sessions carry
        # settings; and the small batches' one, on its generic plan) and on a pooled one (the
        # producer's side queries). One session each: an idle worker holds five with LISTEN,
        # and the heartbeat opens a second outcome session only when it first overlaps a batch.
        nothing = ClaimParams(None, 0, "warm-up", "warm-up", 1.0, 0.0)
        with _wrapped("warm_up"):
            await self._claim_sorted(self._sql.JOB_GET_AVAILABLE, nothing)
            async with (self._by_id_pool or self.pool).acquire() as conn:
                await conn.fetch(
                    self._sql.JOB_SET_STATE_IF_RUNNING_MANY,
                    *ops.completion_params([], self._now(), self.done_channel),
                )
                await conn.fetch(
                    self._sql.JOB_HEARTBEAT_MANY, [], [], 1.0, 0.0, self._now(), [], [], None
                )
            if self._by_id_small_pool is not None:
                async with self._by_id_small_pool.acquire() as conn:
                    await conn.fetch(
                        self._sql.JOB_SET_STATE_AND_RELEASE,
                        *ops.completion_params([], self._now(), self.done_channel),
                        self.channel,
                        RELEASE_CHUNK,
                    )
            async with self.pool.acquire() as conn:
                await conn.fetch(self._sql.QUEUE_LIMITED)
                await conn.fetch(
                    self._sql.JOB_GET_AVAILABLE_IN_QUEUES,
                    *self._claim_args(dataclasses.replace(nothing, queues=()), None),
                    False,
                )

    async def job_set_state_if_running_many(self, completions: Sequence[Completion]) -> list[int]:
        if not completions:
            return []
        # First in the segments the jobs were claimed from (nearly always one), then what that
        # missed in the long segment, where a rotation moves a job that ran past its
        # segment's turn (the rest of the missed lost their lease: found nowhere).
        with _wrapped("job_set_state_if_running_many"):
            written = await self._write_outcomes(completions, None)
            done = [r["id"] for r in written.rows]
            if written.segments_given and len(done) < len(completions):
                found = set(done)
                missed = [c for c in completions if c.job_id not in found]
                more = await self._write_outcomes(missed, ops.LONG_SEGMENTS)
                written.add(more)
                done += [r["id"] for r in more.rows]
        await self._follow_completion(written)
        return done

    async def _write_outcomes(
        self, completions: Sequence[Completion], segments: list[int] | None
    ) -> _Written:
        """One completion statement. A few outcomes go to the generic plan's session, in the
        statement that also releases the children of those that succeeded (one round trip
        for a chain's link); a batch to the custom plan's sessions, its releases after it."""
        params = ops.completion_params(completions, self._now(), self.done_channel, segments)
        small = self._by_id_small_pool
        if small is None or len(completions) > SMALL_OUTCOME_BATCH:
            return await self._write_outcomes_alone(params)
        try:
            return await self._write_outcomes_releasing(small, params)
        except asyncpg.PostgresError as exc:
            if isinstance(exc, CONNECTION_ERRORS):
                raise
            # the release refused (a user's trigger, a limit): the outcomes must not wait for
            # it; written alone, the release is tried after them (and by the sweep)
            log.warning("a completion's own release failed (%s); writing the outcomes alone", exc)
            return await self._write_outcomes_alone(params)

    async def _write_outcomes_alone(self, params: list[Any]) -> _Written:
        """The completion statement without a release: the children of the jobs that
        succeeded are released after it (``release_later``)."""
        rows = await self._by_id(self._sql.JOB_SET_STATE_IF_RUNNING_MANY, *params)
        later = [r["id"] for r in rows if r["parented"] and r["succeeded"]]
        return _Written(list(rows), params[13] is not None, release_later=later)

    async def _write_outcomes_releasing(self, small: asyncpg.Pool, params: list[Any]) -> _Written:
        """The completion statement that releases the children of the jobs that succeeded in
        the same statement (a chunk of them: the rest ``release_later``)."""
        given = params[13] is not None
        statement = self._sql.JOB_SET_STATE_AND_RELEASE

        async def attempt() -> list[Any]:
            async with self._releasing(small) as (conn, woken):
                rows: list[Any] = await conn.fetch(statement, *params, self.channel, RELEASE_CHUNK)
                if rows:
                    woken.update(rows[0]["woken"] or ())
                return rows

        rows = await self._deadlock_retried(attempt)
        if not rows:
            return _Written([], given)
        first = rows[0]  # the release's columns repeat on every row
        full = first["resolved_n"] >= RELEASE_CHUNK
        return _Written(
            list(rows),
            given,
            woken=set(first["woken"] or ()),
            stale=list(first["stale"] or ()),
            release_later=[r["id"] for r in rows if r["succeeded"]] if full else [],
        )

    async def _deadlock_retried(self, attempt: Callable[[], Awaitable[R]]) -> R:
        """``attempt`` (one statement, or a transaction), run again on a row moved between
        partitions, and where PostgreSQL broke it off to end a deadlock (a person's cancel
        of a waiting child locks it and its wait row the other way round)."""
        for tries_left in range(WORKFLOW_TRIES - 1, -1, -1):
            try:
                return await retry_moved(attempt)
            except asyncpg.exceptions.DeadlockDetectedError:
                if not tries_left:
                    raise
        raise AssertionError("unreachable")

    async def _follow_completion(self, written: _Written) -> None:
        """What the completion statement left to workflows: tell this process's workers of
        the children it released; release the children it left at zero for a newer
        snapshot, and the rest (or all) of the children of jobs that succeeded
        (RELEASE_SUCCEEDED, a chunk a transaction); resume, in a flow, the children of jobs
        that failed and parked jobs already signalled. A failure here leaves it to the sweep
        (the outcomes are written)."""
        self._tell_released(written.woken)
        failed = [r["id"] for r in written.rows if r["parented"] and not r["succeeded"]]
        parked = [r["id"] for r in written.rows if r["parked"]]
        try:
            if written.stale:
                await self._release_stale(written.stale)
            if written.release_later:
                await self._release_succeeded(written.release_later)
            if failed or parked:
                await self.workflow_after_completion(failed, parked)
        except BackendError as exc:
            log.warning("workflow release after a completion failed (the sweep will): %s", exc)

    async def _release_stale(self, children: list[int]) -> None:
        """Children a release left at zero (their wait row was newer than its snapshot, or
        the list of their parents' results is over the bound): released (or buried) by a
        statement of their own, which sees every parent's result."""

        async def attempt() -> tuple[set[str], list[int]]:
            async with self._releasing(self.pool) as (conn, woken):
                buried = await self._children_ready(conn, children, woken)
                return woken, buried

        with _wrapped("workflow_release"):
            woken, buried = await self._deadlock_retried(attempt)
            self._tell_released(woken)
        await self._release_buried(buried)

    async def _children_ready(self, conn: Any, children: list[int], woken: set[str]) -> list[int]:
        """CHILDREN_READY on ``conn``: the queues it woke added to ``woken``; the children it
        buried (their list of results over the bound) returned."""
        rows = await conn.fetch(
            self._wf.CHILDREN_READY, children, self.channel, self._now(), self.max_payload_bytes
        )
        woken.update(r["queue"] for r in rows if not r["buried"])
        return [r["id"] for r in rows if r["buried"]]

    async def _release_buried(self, buried: list[int]) -> None:
        """The children of jobs a release buried follow their policies (as a dead parent's
        do): at once, or by the sweep should this fail."""
        if buried:
            await self.workflow_release(buried)

    @asynccontextmanager
    async def _releasing(self, pool: asyncpg.Pool) -> AsyncIterator[tuple[Any, set[str]]]:
        """A session of ``pool`` for a release of ours, and the set its caller fills with the
        queues the release woke: the NOTIFYs the session sends meanwhile are held, then
        settled (``_settle_own_notifies``)."""
        async with pool.acquire() as conn:
            woken: set[str] = set()
            pid: int = conn.get_server_pid()
            self._held_notifies[pid] = []
            try:
                yield conn, woken
            finally:
                self._settle_own_notifies(pid, woken)

    def _settle_own_notifies(self, pid: int, woken: set[str]) -> None:
        """The NOTIFY a release of ours on session ``pid`` sends at its commit would wake
        this process's workers a second time (``on_released`` tells them, and the claim that
        follows begins after the commit): a claim that finds nothing, in the path of the
        next link of a chain (a claim a link, not two). Those that came while the release
        ran (held) are dropped, those still to come are expected (and dropped when they do),
        only where a worker here is told; any other is passed on."""
        held = self._held_notifies.pop(pid, [])
        told = woken if self.on_released is not None else set()
        for queue in held:
            if queue not in told:
                for wake in list(self._wakers):
                    wake(queue)
        until = time.monotonic() + OWN_NOTIFY_S
        for queue in told.difference(held):
            self._own_notifies[(pid, queue)] = until

    def _notified(self, pid: int, queue: str) -> bool:
        """Whether the NOTIFY from session ``pid`` should wake: False for one a release of
        ours sent (held while it runs, or expected after it)."""
        held = self._held_notifies.get(pid)
        if held is not None:
            held.append(queue)
            return False
        until = self._own_notifies.pop((pid, queue), None)
        if len(self._own_notifies) > 1000:  # releases whose commit failed leave theirs
            now = time.monotonic()
            self._own_notifies = {k: t for k, t in self._own_notifies.items() if t > now}
        return until is None or until <= time.monotonic()

    def _tell_released(self, woken: set[str]) -> None:
        if woken and self.on_released is not None:
            self.on_released(woken)

    async def _release_succeeded(self, parents: list[int]) -> None:
        """The children of ``parents`` (succeeded), RELEASE_CHUNK edges a transaction, until
        a chunk comes back short."""
        statement = self._wf.RELEASE_SUCCEEDED

        async def attempt() -> tuple[int, set[str], list[int]]:
            # one statement, committed alone; children it left at zero (stale) by a second,
            # whose snapshot sees their every parent's result (the sweep's StrandedWaits
            # should this process die between the two)
            async with self._releasing(self.pool) as (conn, woken):
                row = await conn.fetchrow(
                    statement, parents, self.channel, self._now(), RELEASE_CHUNK
                )
                assert row is not None  # one row, always
                woken.update(row["woken"] or ())
                buried = []
                if row["stale"]:
                    buried = await self._children_ready(conn, row["stale"], woken)
                return int(row["resolved_n"]), woken, buried

        buried: list[int] = []
        with _wrapped("workflow_release"):
            while True:
                resolved, woken, more = await self._deadlock_retried(attempt)
                self._tell_released(woken)
                buried += more
                if resolved < RELEASE_CHUNK:
                    break
        await self._release_buried(buried)

    async def job_cancel_requested(self, job_ids: Sequence[int]) -> list[int]:
        if not job_ids:
            return []
        with _wrapped("job_cancel_requested"):
            rows = await self.pool.fetch(self._sql.JOB_CANCEL_REQUESTED, list(job_ids))
        return [r["id"] for r in rows]

    async def job_prune(self, params: JobPruneParams) -> int:
        # Whole history days past the retention go first, by DROP (milliseconds, whatever
        # their size); the batch then deletes the rest of the rule's rows (the straddling day,
        # dead jobs, the default partition), as before.
        with _wrapped("job_prune"):
            async with self.pool.acquire() as conn:
                now: datetime = await conn.fetchval(storage.DB_NOW, self._now())
                dropped = 0
                if params.finished_age_s < MAX_AGE_S:
                    cutoff = now - timedelta(seconds=params.finished_age_s)
                    dropped = await storage.drop_expired(conn, self.schema, cutoff)
                status = await retry_moved(
                    lambda: conn.execute(
                        self._sql.JOB_PRUNE,
                        params.finished_age_s,
                        params.dead_age_s,
                        self._now(),
                        params.batch,
                    )
                )
        return dropped + int(status.split()[-1])

    async def hot_vacuum(self, min_dead: int) -> HotVacuum | None:
        with _wrapped("hot_vacuum"):
            async with self.pool.acquire() as conn:
                done = await storage.vacuum_live(conn, self.schema, min_dead)
        if done is None:
            return None
        before, after, report = done
        if report is None:
            return HotVacuum(before, after)
        if report == storage.SKIPPED:
            return HotVacuum(before, after, skipped=True)
        return HotVacuum(before, after, removed=report[0], kept=report[1])

    async def rotate_live(self, min_bytes: int) -> Rotation | None:
        with _wrapped("rotate_live"):
            async with self.pool.acquire() as conn:
                return await rotation.rotate_live(conn, self.schema, min_bytes, self.channel)

    async def storage_hold(
        self, hold: str, min_age_s: float = HOLD_MIN_S, relations: Sequence[str] = ()
    ) -> StorageHold | None:
        if hold not in ("lock", "horizon"):
            return None
        with _wrapped("storage_hold"):
            async with self.pool.acquire() as conn:
                if hold == "lock":
                    names = list(relations) or await holders.rotation_relations(conn, self.schema)
                    return await holders.lock_holders(conn, names, min_age_s)
                live = f'"{self.schema}".skiplock_jobs_live'
                return await holders.horizon_holders(conn, live, min_age_s)

    async def wal_checkpoint(self, truncate_above: int) -> WalCheckpoint | None:
        return None  # the server keeps its own write-ahead log

    async def storage_upkeep(self) -> list[str]:
        made = await self._make_ahead("storage_upkeep", analyze=True)
        with _wrapped("storage_upkeep"):  # a slice of the key turns, those of idle keys go
            self._turns_after = await self.pool.fetchval(
                self._sql.KEY_TURNS_PRUNE, self._turns_after, KEY_TURNS_SLICE
            )
        return made

    async def _make_ahead(self, operation: str, *, analyze: bool) -> list[str]:
        """The history partitions of today and the next days, by the database's clock."""
        with _wrapped(operation):
            async with self.pool.acquire() as conn:
                now: datetime = await conn.fetchval(storage.DB_NOW, self._now())
                return await storage.make_ahead(conn, self.schema, now, analyze=analyze)

    async def job_prune_preview(self, params: JobPruneParams) -> dict[str, int]:
        with _wrapped("job_prune_preview"):
            rows = await self.pool.fetch(
                self._sql.JOB_PRUNE_PREVIEW, params.finished_age_s, params.dead_age_s, self._now()
            )
        return {r["state"]: int(r["n"]) for r in rows}

    async def job_reclaim_expired(self, into: list[ReclaimedJob] | None = None) -> list[int]:
        with _wrapped("job_reclaim_expired"):
            rows = await self._retrying.fetch(
                self._sql.JOB_RECLAIM_EXPIRED, self._now(), MAX_ERRORS_KEPT
            )
        if into is not None:
            into += reclaimed_jobs(rows)
        return [r["id"] for r in rows]

    async def job_reclaim_worker(
        self,
        worker_id: str,
        into: list[ReclaimedJob] | None = None,
        why: str = RELEASED_BY_SUPERVISOR,
    ) -> list[int]:
        with _wrapped("job_reclaim_worker"):
            rows = await self._retrying.fetch(
                self._sql.JOB_RECLAIM_WORKER, self._now(), MAX_ERRORS_KEPT, worker_id, why
            )
        if into is not None:
            into += reclaimed_jobs(rows)
        return [r["id"] for r in rows]

    async def job_heartbeat_many(self, params: JobHeartbeatManyParams) -> list[tuple[int, str]]:
        if not params.held:
            return []
        with _wrapped("job_heartbeat_many"):
            rows = await self._by_id(
                self._sql.JOB_HEARTBEAT_MANY,
                [job_id for job_id, _ in params.held],
                [token for _, token in params.held],
                params.default_lease,
                params.lease_margin,
                self._now(),
                [pair in params.started for pair in params.held],
                [params.progress.get(job_id) for job_id, _ in params.held],
                ops.heartbeat_segments(params.segments),
            )
        return [(r["id"], r["lease_token"]) for r in rows]

    async def cron_slot_claim(self, params: CronSlotClaimParams) -> tuple[SlotOutcome, int | None]:
        with _wrapped("cron_slot_claim"):
            async with self.pool.acquire() as conn, conn.transaction():
                return await flows.drive_async(flows.cron_slot(params), self._answers(conn))

    def cron_slot_claim_sync(self, params: CronSlotSyncParams) -> bool:
        execute: Callable[..., Any] = params.connection.execute  # type: ignore[attr-defined]
        insert = ops.to_psycopg(self._sql.CRON_SLOT_INSERT_AT)
        claim = {"p1": params.schedule, "p2": params.slot, "p3": params.created}
        if not execute(insert, claim).fetchall():
            return False
        job_id = params.enqueue()
        outcome = ops.to_psycopg(self._sql.CRON_SLOT_SET_OUTCOME)
        execute(outcome, {"p1": params.schedule, "p2": params.slot, "p3": job_id, "p4": False})
        return True

    def cron_slots_prune_sync(self, connection: object, before: datetime) -> int:
        execute: Callable[..., Any] = connection.execute  # type: ignore[attr-defined]
        return int(execute(ops.to_psycopg(self._sql.CRON_SLOTS_PRUNE), {"p1": before}).rowcount)

    def job_import_outcome_sync(self, params: JobImportOutcomeParams) -> bool:
        execute: Callable[..., Any] = params.connection.execute  # type: ignore[attr-defined]
        values = (
            params.job_id,
            params.state,
            params.attempt,
            params.created_at,
            params.attempted_at,
            params.finished_at,
            params.result_json,
            params.errors_json,
            params.locked_by,
        )
        named = {f"p{i}": v for i, v in enumerate(values, 1)}
        return bool(execute(ops.to_psycopg(self._sql.JOB_IMPORT_OUTCOME), named).rowcount)

    @asynccontextmanager
    async def listen(self, on_wake: Callable[[str], None]) -> AsyncIterator[asyncio.Event]:
        """LISTEN on a dedicated connection; the yielded event is set if it is lost."""

        def notified(_conn: Any, pid: int, _channel: str, payload: object) -> None:
            if self._notified(pid, str(payload)):
                on_wake(str(payload))

        self._wakers.append(on_wake)
        try:
            async with self._listening(self.channel, notified) as lost:
                yield lost
        finally:
            self._wakers.remove(on_wake)

    @asynccontextmanager
    async def listen_done(
        self, on_done: Callable[[list[int] | None], None]
    ) -> AsyncIterator[asyncio.Event]:
        """LISTEN on the completion channel: each notification names the ids it finished."""

        def notified(_conn: Any, _pid: int, _channel: str, payload: object) -> None:
            try:
                on_done([int(i) for i in str(payload).split(",")])
            except ValueError:
                on_done(None)  # not ours to parse: check every waiter

        async with self._listening(self.done_channel, notified) as lost:
            yield lost

    @asynccontextmanager
    async def _listening(
        self, channel: str, notified: Callable[..., None]
    ) -> AsyncIterator[asyncio.Event]:
        lost = asyncio.Event()
        if self._listen_dsn is None:
            raise ConfigurationError(
                "url: LISTEN needs a direct connection behind pooler=transaction: add "
                "listen_url=postgresql://... (or run poll-only)"
            )
        with _wrapped("listen"), self._connecting():
            conn = await asyncpg.connect(
                self._listen_dsn,
                server_settings=self._settings,
                timeout=self.connect_timeout_s,
                **self._driver,
            )
        conn.add_termination_listener(lambda _c: lost.set())
        try:
            with _wrapped("listen"):
                await conn.add_listener(channel, notified)
            yield lost
        finally:
            if not conn.is_closed():
                try:
                    await asyncio.wait_for(conn.close(), timeout=5)
                except (TimeoutError, Exception):
                    conn.terminate()

    # -- operations a person drives -------------------------------------------------------

    async def job_busiest_keys(
        self, limit: int, queue: str | None = None, task: str | None = None
    ) -> list[KeyLoad]:
        with _wrapped("job_busiest_keys"):
            args = (self._now(), queue, task, limit)
            rows = await self.pool.fetch(self._sql.JOB_BUSIEST_KEYS, *args)
        return [key_load(tuple(r)) for r in rows]

    async def job_blocked_keys(self, limit: int) -> list[BlockedKey]:
        with _wrapped("job_blocked_keys"):
            rows = await self.pool.fetch(self._sql.JOB_BLOCKED_KEYS, limit)
        return [blocked_key(tuple(r)) for r in rows]

    async def queue_list(self) -> list[QueueInfo]:
        with _wrapped("queue_list"):
            rows = await self.pool.fetch(self._sql.QUEUE_LIST)
        return [QueueInfo(*r) for r in rows]

    async def queue_info(self, queue: str) -> QueueInfo:
        with _wrapped("queue_info"):
            row = await self.pool.fetchrow(self._sql.QUEUE_INFO, queue)
        assert row is not None  # one row whatever the name
        return QueueInfo(*row)

    async def queue_known(self, queue: str) -> bool:
        with _wrapped("queue_known"):
            return bool(await self.pool.fetchval(self._sql.QUEUE_KNOWN, queue))

    async def queue_set_paused(self, params: QueueSetPausedParams) -> None:
        with _wrapped("queue_set_paused"):
            await self.pool.execute(self._sql.QUEUE_SET_PAUSED, params.queue, params.paused)

    async def queue_set_limits(self, params: QueueSetLimitsParams) -> None:
        p = params
        with _wrapped("queue_set_limits"):
            await self.pool.execute(
                self._sql.QUEUE_SET_LIMITS,
                p.queue,
                p.max_depth,
                p.max_running,
                p.rate_per_s,
                p.aging_s,
                sorted(p.given),
            )

    async def task_pause(self, params: TaskPauseParams) -> None:
        with _wrapped("task_pause"):
            await self.pool.execute(
                self._sql.TASK_PAUSE, params.task, params.for_s, params.reason, self._now()
            )

    async def task_resume(self, task: str) -> bool:
        with _wrapped("task_resume"):
            return bool(await self.pool.fetch(self._sql.TASK_RESUME, task))

    async def task_pauses(self) -> list[TaskPause]:
        with _wrapped("task_pauses"):
            rows = await self.pool.fetch(self._sql.TASK_PAUSES, self._now())
        return [TaskPause(*r) for r in rows]

    async def audit_record(self, params: AuditRecordParams) -> None:
        with _wrapped("audit_record"):
            await self.pool.execute(
                self._sql.AUDIT_RECORD,
                params.who,
                params.what,
                params.target,
                params.detail,
                self._now(),
            )

    async def audit_list(self, limit: int, before_id: int | None) -> list[AuditEntry]:
        with _wrapped("audit_list"):
            rows = await self.pool.fetch(self._sql.AUDIT_LIST, limit, before_id)
        return [AuditEntry(*r) for r in rows]

    async def audit_prune(self, age_s: float, batch: int) -> int:
        with _wrapped("audit_prune"):
            status = await self.pool.execute(self._sql.AUDIT_PRUNE, age_s, self._now(), batch)
        return int(status.split()[-1])

    async def audit_prune_preview(self, age_s: float) -> int:
        with _wrapped("audit_prune_preview"):
            return int(await self.pool.fetchval(self._sql.AUDIT_PRUNE_PREVIEW, age_s, self._now()))

    async def job_get(self, job_id: int) -> JobRecord:
        with _wrapped("job_get"):
            r = await self.pool.fetchrow(self._sql.JOB_GET, job_id)
        if r is None:
            raise JobNotFound(f"no job with id {job_id}")
        return job_record(r)

    async def job_outcome_many(self, job_ids: Sequence[int]) -> list[JobOutcome]:
        if not job_ids:
            return []
        with _wrapped("job_outcome_many"):
            rows = await self.pool.fetch(self._sql.JOB_OUTCOME_MANY, list(job_ids))
        return job_outcomes(rows)

    async def job_count_by_state(self, queue: str | None = None) -> dict[str, int]:
        with _wrapped("job_count_by_state"):
            live, rest = await reads.fetch_parts(self._reads, self._sql.JOB_COUNT_BY_STATE, queue)
        return state_counts((r["state"], r["n"]) for r in live + rest)

    async def job_count_by_queue(self) -> dict[str, dict[str, int]]:
        with _wrapped("job_count_by_queue"):
            live, rest = await reads.fetch_parts(self._reads, self._sql.JOB_COUNT_BY_QUEUE)
        return queue_state_counts((r["queue"], r["state"], r["n"]) for r in live + rest)

    async def job_retry(self, params: JobActionParams) -> bool:
        job_id, who = params.job_id, params.who
        with _wrapped("job_retry"):
            # one that ended waiting for its parents waits for them again; any other is
            # requeued as it is (JOB_RETRY leaves the first kind alone)
            if await self._wf_transaction(lambda: wf.retry_unreleased(job_id, who), None):
                return True
            rows = await self._retrying.fetch(
                self._sql.JOB_RETRY, job_id, self.channel, self._now(), who
            )
        return bool(rows)

    async def job_cancel(self, params: JobActionParams) -> JobState:
        with _wrapped("job_cancel"):
            state = await self._retrying.fetchval(
                self._sql.JOB_CANCEL, params.job_id, params.who, self._now()
            )
        if state is None:
            return (await self.job_get(params.job_id)).state
        return JobState(state)

    async def _read(self, how: str, statement: str, params: JobListParams, *more: Any) -> Any:
        """A person's filtered read (JOB_LIST's filter): of one state, on its partition alone;
        of every state, in two parts on one snapshot (postgres_reads). ``how``: fetch, or
        fetchval for a count (the parts' counts added up)."""
        state = params.state.value if params.state else None
        args = (state, *ops.filter_params(params.where), *more)
        if state is not None:
            return await self._reads.by_state(how, statement, state, *args)
        live, rest = await reads.fetch_parts(self._reads, statement, *args)
        if how == "fetchval":
            return sum(int(r[0]) for r in live + rest)
        return live + rest

    async def job_list(self, params: JobListParams) -> list[JobRecord]:
        oldest = params.oldest_first
        statement = self._sql.JOB_LIST_OLDEST if oldest else self._sql.JOB_LIST
        with _wrapped("job_list"):
            rows = await self._read(
                "fetch", statement, params, params.where.limit, params.before_id
            )
        # each part's first `limit` by id: together, the first `limit` of both
        rows = sorted(rows, key=lambda r: r["id"], reverse=not oldest)[: params.where.limit]
        return [job_record(r) for r in rows]

    async def job_count(self, params: JobListParams) -> int:
        with _wrapped("job_count"):
            return int(await self._read("fetchval", self._sql.JOB_COUNT, params))

    async def job_count_states(self, params: JobListParams) -> dict[str, int]:
        with _wrapped("job_count_states"):
            rows = await self._read("fetch", self._sql.JOB_COUNT_STATES, params)
        return {r["state"]: int(r["n"]) for r in rows}

    async def job_find(self, text: str, limit: int) -> list[JobRecord]:
        with _wrapped("job_find"):
            live, rest = await reads.fetch_parts(self._reads, self._sql.JOB_FIND, text, limit)
        rows = sorted(live + rest, key=lambda r: r["id"], reverse=True)[:limit]
        return [job_record(r) for r in rows]

    async def job_dead_groups(self, limit: int) -> list[DeadGroup]:
        with _wrapped("job_dead_groups"):
            rows = await self._reads.one("fetch", self._sql.JOB_DEAD_GROUPS, limit)
        return [dead_group(r) for r in rows]

    async def job_requeue_dead(self, params: DeadActionParams) -> list[int]:
        with _wrapped("job_requeue_dead"):
            rows = await self._retrying.fetch(
                self._sql.JOB_REQUEUE_DEAD,
                params.who,
                *ops.filter_params(params.where),
                self._now(),
                self.channel,
                params.where.limit,
            )
        return [r["id"] for r in rows]

    async def job_discard_dead(self, params: DeadActionParams) -> list[int]:
        where = ops.filter_params(params.where)
        with _wrapped("job_discard_dead"):
            rows = await self._retrying.fetch(
                self._sql.JOB_DISCARD_DEAD, params.who, *where, self._now(), params.where.limit
            )
        return [r["id"] for r in rows]

    async def cron_last_slots(self) -> dict[str, datetime]:
        with _wrapped("cron_last_slots"):
            rows = await self.pool.fetch(self._sql.CRON_LAST_SLOTS)
        return {r["schedule"]: r["slot"] for r in rows}

    async def cron_last_runs(self) -> list[CronRun]:
        with _wrapped("cron_last_runs"):
            rows = await self.pool.fetch(self._sql.CRON_LAST_RUNS)
        return [CronRun(r["schedule"], r["slot"], r["job_id"]) for r in rows]

    async def cron_slots_prune(self, before: datetime) -> int:
        with _wrapped("cron_slots_prune"):
            status = await self.pool.execute(self._sql.CRON_SLOTS_PRUNE, before)
        return int(status.split()[-1])

    # -- observability ----------------------------------------------------------------------

    async def job_stats(self, params: JobStatsParams) -> JobStatsRows:
        with _wrapped("job_stats"):
            return await observe.job_stats(self._reads, self._sql, params, self._now())

    async def worker_beat(self, params: WorkerBeatParams) -> None:
        with _wrapped("worker_beat"):
            await self.pool.execute(self._sql.WORKER_BEAT, *observe.beat_args(params, self._now()))

    async def worker_delete(self, worker_id: str) -> None:
        with _wrapped("worker_delete"):
            await self.pool.execute(self._sql.WORKER_DELETE, worker_id)

    async def worker_prune(self, silent_s: float) -> int:
        with _wrapped("worker_prune"):
            status = await self.pool.execute(self._sql.WORKER_PRUNE, silent_s, self._now())
        return int(status.split()[-1])

    async def worker_list(self) -> list[WorkerInfo]:
        with _wrapped("worker_list"):
            rows = await self.pool.fetch(self._sql.WORKER_LIST, self._now())
        return [worker_info(r, lambda t: t) for r in rows]

    # -- workflows (postgres_workflow_sql.py) -----------------------------------------------

    @property
    def _wf(self) -> WorkflowStatements:
        statements = self.__dict__.get("_wf_sql")
        if statements is None:
            statements = self.__dict__["_wf_sql"] = WorkflowStatements.for_schema(self.schema)
        return statements

    def _wf_answers(self, conn: Any) -> workflow.Answers:
        return workflow.Answers(
            conn,
            self._wf,
            self.channel,
            self._now(),
            self.job_insert_many,
            self.schema,
            self._copy_asyncpg,
            bound=self.max_payload_bytes,
        )

    async def _wf_transaction(
        self, make: Callable[[], flows.Flow[R]], connection: object | None
    ) -> R:
        """A workflow flow in one transaction: the caller's (``connection``), or one of ours,
        run again from the start where it met a row moved between partitions or a deadlock
        (each attempt a new flow: nothing of a rolled-back one is kept)."""
        if connection is not None:  # a savepoint inside the caller's transaction, or one
            if _begins_implicitly(connection):
                await connection.execute("SELECT 1")  # type: ignore[attr-defined]
            async with connection.transaction():  # type: ignore[attr-defined]
                return await flows.drive_async(make(), self._wf_answers(connection))
        result, woken = await self._wf_own_transaction(make)
        if woken and self.on_released is not None:  # this process's workers claim at once
            self.on_released(woken)
        return result

    async def _wf_own_transaction(self, make: Callable[[], flows.Flow[R]]) -> tuple[R, set[str]]:
        """The flow in a transaction of ours; its result and the queues it made jobs pending
        in (told after the commit)."""

        async def attempt() -> tuple[R, set[str]]:
            async with self.pool.acquire() as conn, conn.transaction():
                answers = self._wf_answers(conn)
                return await flows.drive_async(make(), answers), answers.woken

        for _ in range(WORKFLOW_TRIES - 1):
            try:
                return await retry_moved(attempt)
            except asyncpg.exceptions.DeadlockDetectedError:
                continue
        return await retry_moved(attempt)

    async def workflow_enqueue(self, plan: Plan, connection: object | None) -> list[int]:
        with _wrapped("workflow_enqueue"):
            return await self._wf_transaction(lambda: wf.enqueue_plan(plan), connection)

    def workflow_enqueue_sync(self, plan: Plan, connection: object) -> list[int]:
        """``workflow_enqueue`` on the caller's synchronous psycopg connection (Django's, a
        SQLAlchemy session's), in its transaction (a savepoint inside it)."""

        async def insert(params: JobInsertManyParams) -> list[int]:
            return self.job_insert_many_sync(params)

        answers = workflow.Answers(
            connection,
            self._wf,
            self.channel,
            self._now(),
            insert,
            self.schema,
            sync=True,
            bound=self.max_payload_bytes,
        )
        if _begins_implicitly(connection):
            connection.execute("SELECT 1")  # type: ignore[attr-defined]
        with _wrapped("workflow_enqueue"), connection.transaction():  # type: ignore[attr-defined]
            return flows.drive(wf.enqueue_plan(plan), lambda step: workflow.run_now(answers(step)))

    async def workflow_open_batch(
        self, on_success: NewJob | None, on_complete: NewJob | None, connection: object | None
    ) -> int:
        with _wrapped("workflow_open_batch"):
            return await self._wf_transaction(
                lambda: wf.open_batch(on_success, on_complete), connection
            )

    async def workflow_close_batch(self, batch_id: int) -> bool:
        with _wrapped("workflow_close_batch"):
            return await self._wf_transaction(lambda: wf.close_batch(batch_id), None)

    async def workflow_release(self, parents: Sequence[int]) -> list[int]:
        if not parents:
            return []
        with _wrapped("workflow_release"):
            return await self._wf_transaction(lambda: wf.release(list(parents)), None)

    async def workflow_after_completion(
        self, finished: Sequence[int], parked: Sequence[int]
    ) -> list[int]:
        with _wrapped("workflow_after_completion"):
            return await self._wf_transaction(lambda: wf.after_completion(finished, parked), None)

    async def workflow_sweep(self) -> SweepResult:
        async def run(make: Callable[[], flows.Flow[R]]) -> R:
            with _wrapped("workflow_sweep"):
                return await self._wf_transaction(make, None)

        return await workflow_sweep.sweep(run)

    async def workflow_expire_waits(self) -> list[int]:
        with _wrapped("workflow_expire_waits"):
            return await self._wf_transaction(wf.expire_waits, None)

    async def workflow_next_wait_timeout(self) -> float | None:
        with _wrapped("workflow_next_wait_timeout"):
            seconds: float | None = await self.pool.fetchval(
                self._wf.WAIT_NEXT_TIMEOUT, self._now()
            )
        return seconds

    async def workflow_abort_batch(self, batch_id: int, error_json: str) -> bool:
        with _wrapped("workflow_abort_batch"):
            return await self._wf_transaction(lambda: wf.abort_batch(batch_id, error_json), None)

    async def workflow_wait_prepare(self, job_id: int, token: str, name: str, seq: int) -> bool:
        with _wrapped("workflow_wait_prepare"):
            row = await self.pool.fetchval(self._wf.WAIT_PREPARE, job_id, token, name, seq)
        return row is not None

    async def workflow_signal(
        self, job_id: int, name: str, payload_json: str | None, who: str, kept_most: int
    ) -> SignalReceipt:
        async def attempt() -> SignalReceipt:
            async with self.pool.acquire() as conn, conn.transaction():
                state = await conn.fetchval(self._wf.JOB_LOCK_STATE, job_id)
                if state is None:
                    raise JobNotFound(f"job {job_id}: no such job")
                if state in FINAL_STATES:
                    receipt = SignalReceipt(job_id, name, SignalOutcome.FINISHED)
                else:
                    seq = await conn.fetchval(
                        self._wf.SIGNAL_APPEND, job_id, name, payload_json, who, kept_most
                    )
                    if seq is None:
                        raise mailbox_full(job_id, kept_most)
                    wait = await conn.fetchrow(self._wf.WAIT_OF, job_id)
                    receipt = signal_taken(job_id, name, seq, None if wait is None else tuple(wait))
                    if receipt.awaited:
                        await conn.execute(
                            self._wf.SIGNAL_WAKE, job_id, name, self.channel, self._now()
                        )
                    # a finished job's row is left alone: skiplock_audit has the signal
                    what = f"signal {name}: {receipt.outcome.value}"
                    await conn.execute(self._wf.JOB_AUDIT_ADD, job_id, who, what, self._now())
                return receipt

        with _wrapped("workflow_signal"):
            return await retry_moved(attempt)

    async def workflow_signal_take(self, job_id: int, name: str, seq: int) -> StoredSignal | None:
        with _wrapped("workflow_signal_take"):
            row = await self.pool.fetchrow(self._wf.SIGNAL_TAKE, job_id, name, seq)
        return None if row is None else stored_signal(*row)

    async def workflow_step_get(self, job_id: int, name: str, seq: int) -> tuple[bool, str | None]:
        with _wrapped("workflow_step_get"):
            row = await self.pool.fetchrow(self._wf.STEP_GET, job_id, name, seq)
        return (False, None) if row is None else (True, row[0])

    async def workflow_step_put(
        self, job_id: int, token: str, name: str, seq: int, result_json: str | None
    ) -> bool:
        with _wrapped("workflow_step_put"):
            row = await self.pool.fetchval(self._wf.STEP_PUT, job_id, token, name, result_json, seq)
        return row is not None

    async def workflow_parent_results(
        self, job_id: int
    ) -> list[tuple[int, str | None, str | None]]:
        with _wrapped("workflow_parent_results"):
            rows = await self.pool.fetch(self._wf.PARENT_RESULTS, job_id)
        return [(r[0], r[1], r[2]) for r in rows]

    async def workflow_links(
        self, job_id: int, children_limit: int, parents_limit: int
    ) -> JobLinks:
        with _wrapped("workflow_links"):
            async with self.pool.acquire() as conn:
                parents = await conn.fetch(self._wf.JOB_PARENTS, job_id, parents_limit)
                counts = await conn.fetch(self._wf.JOB_PARENT_COUNTS, job_id)
                children = await conn.fetch(self._wf.JOB_CHILDREN, job_id, children_limit, 0)
                wait = await conn.fetchrow(self._wf.JOB_WAIT, job_id)
                batch = await conn.fetchval(self._wf.JOB_BATCH, job_id)
        return job_links(
            map(tuple, parents),
            map(tuple, children),
            None if wait is None else tuple(wait),
            batch,
            map(tuple, counts),
        )

    async def workflow_linked(
        self, job_id: int, parents: bool, after: int, limit: int
    ) -> list[LinkedJob]:
        with _wrapped("workflow_linked"):
            if parents:
                rows = await self.pool.fetch(self._wf.JOB_PARENTS_AFTER, job_id, after, limit)
            else:
                rows = await self.pool.fetch(self._wf.JOB_CHILDREN, job_id, limit, after)
        return linked_jobs(map(tuple, rows))

    async def workflow_batch_info(self, batch_id: int) -> BatchInfo:
        with _wrapped("workflow_batch_info"):
            row = await self.pool.fetchrow(self._wf.BATCH_INFO, batch_id)
        if row is None:
            raise JobNotFound(f"batch {batch_id}: no such batch")
        return batch_info(tuple(row))

    async def workflow_waiting(self, limit: int) -> list[WaitingJob]:
        with _wrapped("workflow_waiting"):
            rows = await self.pool.fetch(self._wf.WAITING_LIST, limit)
        return [waiting_job(tuple(r)) for r in rows]

    async def workflow_graph(self, job_id: int, most: int) -> WorkflowGraph:
        with _wrapped("workflow_graph"):
            async with self.pool.acquire() as conn:
                return await flows.drive_async(wf.graph(job_id, most), self._wf_answers(conn))

    async def workflow_prune(self, most: int) -> int:
        with _wrapped("workflow_prune"):
            return int(await self.pool.fetchval(self._wf.WORKFLOW_PRUNE, most))
