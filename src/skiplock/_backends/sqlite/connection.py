"""The SQLite backend's file: its one database thread (its calls queued, their outcomes
handed back), its connections with skiplock's pragmas, the check that the path still names the
file opened, a savepoint on a caller's connection, and ``Connected``, the base of every room's
operations.

SQLite's calls block, so they run off the event loop on one thread that owns the connection
(one writer per process; statements in turn, as the file takes them anyway). It used to be
a ``ThreadPoolExecutor(1)``: each call then built a concurrent Future and an asyncio Future
chained to it, with a loop wake-up per call, ~25 µs of bookkeeping around an INSERT whose
commit takes ~30 µs at ``synchronous=normal``. Here a call is a tuple on a ``SimpleQueue``
and its outcome goes back through the loop's inbox (``_handback``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ..._handback import Handback, handback_for
from ..._job import DEFAULT_LANE
from ..._payload import DEFAULT_MAX_PAYLOAD_BYTES
from ...errors import BackendError, SchemaError
from ..claim_rules import KeyCursors
from ..protocol import Clock
from ..sql_files import fill
from .errors import wrapped as _wrapped
from .statements import STATEMENTS as sql
from .storage.ids import BATCHES, JOBS, IdLedger, may_roll_back
from .url import parse_sqlite_url

log = logging.getLogger("skiplock.worker")

T = TypeVar("T")

_Call = tuple[Callable[[], Any], asyncio.Future[Any], Handback]


class DatabaseThread:
    """``await thread.call(fn)`` runs ``fn()`` on the thread; calls run in the order made."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        # A daemon: a script that never closes its app must still exit (what it awaited is
        # done; SQLite's file is consistent at every instant).
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """``fn()`` on the thread, as a future of this loop. Cancelled before the thread
        reaches it, it never runs; once begun, it runs to its end (its outcome dropped)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((fn, future, handback_for(loop)))
        return future

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            fn, future, inbox = item
            if future.cancelled():  # its waiter has gone (a read of one attribute)
                continue
            try:
                value = fn()
            except BaseException as exc:  # the caller's to handle, on the loop
                inbox.fail(future, exc)
            else:
                inbox.post(future, value)

    def shutdown(self) -> None:
        """Run what is queued, then end the thread and wait for it."""
        self._queue.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join()


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction that holds the file's write lock from its first statement."""
    conn.execute(sql.TRANSACTION_BEGIN_IMMEDIATE)
    try:
        yield conn
    except BaseException:
        conn.execute(sql.TRANSACTION_ROLLBACK)
        raise
    conn.execute(sql.TRANSACTION_COMMIT)


BUSY_TIMEOUT_MS = 10_000


def _lower(value: object) -> str | None:
    """Unicode lower case for the error filter (SQLite's lower() folds only ASCII)."""
    return None if value is None else str(value).lower()


def identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None when there is none."""
    try:
        st = os.stat(path)
    except OSError:  # gone, or its directory gone: not the file opened, either way
        return None
    return st.st_dev, st.st_ino


def own_sqlite(connection: object) -> sqlite3.Connection:
    """The caller's own connection, which a SQLite app needs to be a sqlite3 one."""
    if not isinstance(connection, sqlite3.Connection):
        raise TypeError(
            f"connection: a SQLite app takes a sqlite3.Connection, got {type(connection)!r}"
        )
    return connection


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


@contextlib.contextmanager
def savepoint(conn: sqlite3.Connection) -> Iterator[None]:
    """All of a workflow or none on the caller's connection: a savepoint inside its
    transaction (or, outside one, a transaction of its own that the release commits). A
    connection that begins its transactions implicitly (sqlite3's default: the caller's
    commit or rollback decides, as for the statements it runs itself) is begun first, as
    sqlite3 would before the caller's first write: the savepoint is then the caller's."""
    if not conn.in_transaction and conn.isolation_level is not None:
        conn.execute(fill(sql.TRANSACTION_BEGIN_AS, mode=conn.isolation_level))
    conn.execute(sql.WORKFLOW_SAVEPOINT)
    try:
        yield
    except BaseException:
        conn.execute(sql.WORKFLOW_SAVEPOINT_ROLLBACK)
        conn.execute(sql.WORKFLOW_SAVEPOINT_RELEASE)
        raise
    conn.execute(sql.WORKFLOW_SAVEPOINT_RELEASE)


class Connected:
    """The backend's file, its database thread and connection, and the write transaction every
    operation runs in (the base of every room's operations)."""

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
        """The ids handed out in transactions that may roll back (storage/ids.py)."""
        self._key_cursors: KeyCursors = {}
        """Where each keyed claim's walk starts next (keys.pick)."""
        self._turns_after = ""
        """Where the upkeep's next look for stale key turn rows starts ("": the first)."""
        self._here_pid = 0
        self._here_file: tuple[int, int] | None = None
        self.on_released: Callable[[set[str]], None] | None = None
        """Told the queues a completion's workflow release made jobs pending in, after its
        commit (a worker wakes its producer: no wait for the file's watch)."""
        self.max_payload_bytes = DEFAULT_MAX_PAYLOAD_BYTES
        self.lanes: tuple[str, ...] = (DEFAULT_LANE,)
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
        now = identity(self.path)
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
            self._file = identity(self.path)  # the pragmas in _connect opened the file
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
            conn.execute(fill(sql.PRAGMA_BUSY_TIMEOUT, ms=str(BUSY_TIMEOUT_MS)))
            conn.execute(sql.PRAGMA_JOURNAL_WAL)
            conn.execute(fill(sql.PRAGMA_SYNCHRONOUS, mode=self.synchronous.upper()))
            conn.row_factory = sqlite3.Row  # rows read by column name, or by position
            conn.create_function("skiplock_lower", 1, _lower, deterministic=True)
            self._ids.register(conn)
            return conn

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

    @contextlib.contextmanager
    def _handing_out(self, conn: sqlite3.Connection) -> Iterator[None]:
        """Around a workflow's writes on a caller's connection, which hand out job and batch
        ids: ``conn`` reads the id ledger (storage/ids.py), and if its transaction is still
        open when they succeed (it may yet roll back), the ledger keeps the ids before they
        are returned."""
        self._ids.register(conn)
        yield
        if may_roll_back(conn):
            for table in (JOBS, BATCHES):
                self._ids.mark_counter(conn, table)

    async def _write(self, operation: str, statement: str, args: Any) -> int:
        def write(conn: sqlite3.Connection) -> int:
            with immediate(conn):
                return conn.execute(statement, args).rowcount

        return await self._run(operation, write)
