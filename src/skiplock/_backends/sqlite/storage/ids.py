"""SQLite ids that are never handed out twice (docs/design.md, "SQLite ids outlive a
rollback").

AUTOINCREMENT keeps its counter in ``sqlite_sequence``, a table like any other: an enqueue
inside a caller's transaction (``using(connection=...)``, Django's ``enqueue()`` in
``atomic()``) moves it, a rollback moves it back, and the next enqueue took the id the caller
may have logged or sent to a client already. Nothing written to the database survives that
rollback, and no other connection can write while the caller's transaction holds the lock.

So the highest id handed out inside a transaction that may still roll back goes to a file
beside the database, ``<database>-ids`` (the *id ledger*): eight bytes a table, stored in a
shared mapping of the file before the id is returned, outside any transaction (``IdLedger``
says why mapped). Every insert then takes its ids above both the counter and the ledger: a
single insert computes its id in its own statement, a batch raises the counter first in its
transaction. Both read the ledger through
``skiplock_id_floor(table)``, a function registered on each connection that inserts, so it
is read while the statement holds the database's write lock; and the ledger is written only
while the writer holds that lock, so the lock orders every read and write of it across
processes without one of its own.
"""

from __future__ import annotations

import mmap
import os
import sqlite3
import stat
import struct
import threading
from typing import ClassVar

from ....errors import BackendError
from ..statements import STATEMENTS as sql

JOBS = "skiplock_jobs_live"
BATCHES = "skiplock_batches"
"""The tables whose ids skiplock hands out."""

SLOTS = {JOBS: 0, BATCHES: 8}
"""Where each table's high-water id sits in the ledger (a little-endian int64 each)."""

SIZE = 16
"""The ledger's length: its slots."""

LEDGER_SUFFIX = "-ids"
"""The ledger's file name: the database's, with this after it (as SQLite's ``-wal``)."""

FLOOR = "skiplock_id_floor"
"""The SQL function giving a table's ledger mark (0 without a ledger)."""


class IdLedger:
    """The ``<database>-ids`` file of one database, mapped into memory at its first use
    (made with the database's file mode if missing). One per database file and process
    (``of``): a sync enqueue on a caller's connection builds a backend for the call, and each
    would map the file again.

    Mapped, not read and written by system calls: a caller's enqueue reads the mark three
    times and writes it once, and ``pwrite`` alone cost 17 us here. A shared mapping's
    stores are the page cache's, so another process sees them at once and they outlive this
    process; like an unsynced write, the last of them may be lost to a power cut."""

    _open: ClassVar[dict[str, IdLedger]] = {}
    _opening: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, database_path: str, mode: int) -> IdLedger:
        """The ledger of the database at ``database_path``, shared by this process."""
        key = os.path.abspath(database_path)
        with cls._opening:
            ledger = cls._open.get(key)
            if ledger is None:
                ledger = cls._open[key] = cls(database_path, mode)
            return ledger

    def __init__(self, database_path: str, mode: int) -> None:
        self.database_path = database_path
        self.path = database_path + LEDGER_SUFFIX
        self.mode = mode
        """The mode a new ledger takes when the database has none to give (SQLite gives its
        -wal and -shm the database file's mode; the ledger follows it the same way, so every
        user who may write the database may write the ledger)."""
        self._map: mmap.mmap | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def _mapped(self) -> mmap.mmap:
        """The ledger's bytes, mapped (the file made, or grown to its slots, if need be)
        once per process."""
        mapped, pid = self._map, os.getpid()
        if mapped is not None and self._pid == pid:
            return mapped
        with self._lock:
            if self._map is None or self._pid != pid:
                self._map, self._pid = self._open_map(), pid
            return self._map

    def _open_map(self) -> mmap.mmap:
        made = not os.path.exists(self.path)
        try:
            mode = self._mode()
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, mode)
            try:
                if made:
                    os.chmod(self.path, mode)  # exact, whatever the umask
                if os.fstat(fd).st_size < SIZE:
                    os.ftruncate(fd, SIZE)  # new slots read 0 (a shorter file grows zeros)
                return mmap.mmap(fd, SIZE)
            finally:
                os.close(fd)  # the mapping keeps the file
        except OSError as exc:
            raise BackendError(
                f"the SQLite id ledger {self.path}: {exc.strerror}; skiplock keeps it beside "
                "the database and needs to write it (as SQLite writes the -wal)"
            ) from exc

    def _mode(self) -> int:
        """The database file's permission bits (``mode`` if it has none yet)."""
        try:
            return stat.S_IMODE(os.stat(self.database_path).st_mode)
        except OSError:
            return self.mode

    def floor(self, table: str) -> int:
        """``table``'s mark: the highest id handed out inside a transaction that could still
        roll back (0 if none ever was)."""
        value: int = struct.unpack_from("<q", self._mapped(), SLOTS[table])[0]
        return value

    def mark(self, table: str, handed_out: int) -> None:
        """``handed_out``, an id of ``table`` given out inside a transaction still open
        (which holds the database's write lock), becomes the mark if it is above it: before
        the id is returned to anyone."""
        if handed_out > self.floor(table):
            struct.pack_into("<q", self._mapped(), SLOTS[table], handed_out)

    def mark_counter(self, conn: sqlite3.Connection, table: str) -> None:
        """``mark`` with ``table``'s counter as ``conn``'s open transaction sees it (the
        highest id it handed out, when the writer does not know its ids)."""
        row = conn.execute(sql.ID_COUNTER, {"name": table}).fetchone()
        if row is not None:
            self.mark(table, int(row[0]))

    def register(self, conn: sqlite3.Connection) -> None:
        """Give ``conn`` the ``skiplock_id_floor`` function its inserts read the ledger by
        (the ledger opened now: a file that cannot be is an error here, not in a statement).
        Once a connection: defining a function expires every statement ``conn`` prepared, so
        each of a caller's enqueues would prepare its statements again (measured 8 times the
        enqueue's cost); a probe of the function costs one cached statement that reads no
        table."""
        self._mapped()
        try:
            conn.execute(sql.PROBE).fetchone()
        except sqlite3.OperationalError:  # no such function: a connection new to skiplock
            conn.create_function(FLOOR, 1, self.floor)


def may_roll_back(conn: sqlite3.Connection) -> bool:
    """Whether what ``conn`` just wrote is in a transaction still open (it may roll back)."""
    return conn.in_transaction


def runs_alone(conn: sqlite3.Connection) -> bool:
    """Whether each statement on ``conn`` commits on its own (autocommit, no transaction
    open): a batch on it needs a transaction of its own to raise the counter and insert
    under one lock."""
    if conn.in_transaction:
        return False
    autocommit = getattr(conn, "autocommit", None)  # Python 3.12+: True, False or legacy
    if autocommit is True:
        return True
    if autocommit is False:
        return False
    return conn.isolation_level is None
