"""PostgreSQL's pools and sessions: a pool for work, one for claims, sessions that price a plan
shape out, the address in messages; the state every room of the backend shares."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

import asyncpg

from ..._job import DEFAULT_LANE
from ..._payload import DEFAULT_MAX_PAYLOAD_BYTES
from ...errors import BackendError
from ..claim_rules import KeyCursors
from ..protocol import Clock
from . import statements as sql
from . import url as postgres_url
from .errors import connecting, retry_moved
from .errors import wrapped as _wrapped
from .statements import WorkflowStatements
from .storage import reads, sight
from .url import parse_postgres_url

PRICED_OUT = {"jit": "off"}
"""What every session that prices a plan shape out also sets: a plan that must keep a priced-out
node anyway (the queue-restricted claim sorts its few queues' heads) costs over ten billion,
past ``jit_above_cost``, and PostgreSQL then compiled it: 620 ms for a claim of 4 jobs,
measured (a worker whose sessions were killed every 0.4 s never claimed again)."""

R = TypeVar("R")

log = logging.getLogger("skiplock")

WORKFLOW_TRIES = 5
"""How often a workflow transaction that PostgreSQL broke off to end a deadlock is run again."""

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


class Connection:
    """The backend's state, its pools and sessions: what every room of the class uses."""

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
        """A person's reads: short, and on the live segments for a moment (storage/reads.py)."""
        self.channel = f"skiplock_{self.schema}"
        self.done_channel = f"skiplock_done_{self.schema}"
        """Where completions announce the ids they finished (waiters LISTEN here)."""
        # Name our sessions in pg_stat_activity unless the URL names them itself.
        named = "application_name=" in self._dsn
        self._settings = {} if named else {"application_name": "skiplock"}
        self._sql = sql.Statements.for_schema(self.schema)
        self._sight = sight.Sight()
        """The live segments the ordinary claims name (storage/sight.py)."""
        self._key_cursors: KeyCursors = {}
        """Where each keyed claim's walk starts next (rows.claim_keyed)."""
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
        self.lanes: tuple[str, ...] = (DEFAULT_LANE,)
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
                # the outcome sessions' enable_seqscan = off (see open), for this transaction alone
                await conn.execute(self._sql.SEQSCAN_OFF_IN_TRANSACTION)
                rows: list[Any] = await conn.fetch(statement, *args)
                return rows

        return await retry_moved(in_transaction)

    @property
    def _retrying(self) -> _Retrying:
        """The pool's fetches, run again where they meet a row moved between partitions (the
        operations that lock job rows: errors.moved)."""
        return _Retrying(self.pool)

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise BackendError("the PostgreSQL backend is not open")
        return self._pool

    @property
    def rest_pool(self) -> asyncpg.Pool:
        """The sessions a split read reads the history on (storage.reads.Reads.split)."""
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
                await pool.fetchval(self._sql.SESSION_CHECK)
            except BaseException:
                pool.terminate()  # nothing to wait for: a stop may be cancelling us
                raise
            self._pool = pool
            # The history's side of a person's read (storage.reads.Reads.split): two sessions
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
            # A small batch of outcomes (an idle worker's one job, a chain's link) and the
            # release of its children, on a session of its own, custom plans too. It ran the
            # generic plan (1.2 ms against 0.6 ms an outcome at a 100,000-job backlog: the
            # planning), until PostgreSQL 15.20 crashed in it (issue 44: SIGSEGV in
            # get_matching_partitions, from ExecInitPartitionPruning, three runs of three of
            # benchmarks.readers W9done): a generic plan prunes the live segments named by a
            # parameter when it starts, and a generation detached since the plan was made
            # broke that pruning, taking the whole server down. A custom plan prunes as it is
            # made, with the segments as constants.
            self._by_id_small_pool = await asyncpg.create_pool(
                self._dsn,
                min_size=0,
                max_size=1,
                server_settings={**self._settings, **settings},
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

    @property
    def _wf(self) -> WorkflowStatements:
        statements = self.__dict__.get("_wf_sql")
        if statements is None:
            statements = self.__dict__["_wf_sql"] = WorkflowStatements.for_schema(self.schema)
        return statements
