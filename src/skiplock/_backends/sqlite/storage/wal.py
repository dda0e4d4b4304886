"""SQLite's write-ahead log kept in bounds: a passive checkpoint that says whether a reader
holds it back, and a truncating one once none does (docs/operations/storage.md, "A reader
holding the WAL").

A checkpoint copies the log's pages into the database file, up to the first page a reader's
open transaction may still need: a reader that keeps a read transaction open (a report, a
``sqlite3`` shell in ``BEGIN``, a backup reading page by page) keeps every page written after
it began in the ``-wal`` file, which grows with every commit meanwhile. SQLite cannot say
which connection holds it. Once the reader ends, the next checkpoint completes, but the file
keeps its high-water size (writers start over at its beginning): a ``TRUNCATE`` checkpoint
gives the space back.

Both run on the backend's connection, outside any transaction. The passive one never waits
(on a reader or another checkpoint); the truncating one takes the write lock and waits for
readers still on the log, so it is given TRUNCATE_WAIT_MS, not the backend's busy timeout,
and runs only right after a passive one found nothing held."""

from __future__ import annotations

import dataclasses
import os
import sqlite3

from ...._job import StorageHold
from ...params import WalCheckpoint
from ...protocol import WAL_HELD_MIN_BYTES
from ...sql_files import fill
from ..statements import STATEMENTS as sql

FRAME_HEADER_BYTES = 24
"""Each page in the log follows a frame header of this size."""

TRUNCATE_WAIT_MS = 100
"""How long a ``TRUNCATE`` checkpoint waits for the write lock and for readers on the log
(writers queue behind it meanwhile); past it, it gives up and the next look tries again."""


def wal_bytes(path: str) -> int:
    """The size of the database at ``path``'s ``-wal`` file (0: none)."""
    try:
        return os.path.getsize(path + "-wal")
    except OSError:
        return 0


def passive(conn: sqlite3.Connection, path: str) -> WalCheckpoint:
    """A passive checkpoint: as much of the log copied back as no reader still needs."""
    before = wal_bytes(path)
    busy, log, done = conn.execute(sql.WAL_CHECKPOINT_PASSIVE).fetchone()
    if busy or log < 0:  # another checkpoint holds the log (or it is not in WAL mode)
        return WalCheckpoint(before, None)
    page = int(conn.execute(sql.PAGE_SIZE).fetchone()[0])
    pending = (int(log) - int(done)) * (page + FRAME_HEADER_BYTES)
    return WalCheckpoint(before, log == done, pending)


def checkpoint(
    conn: sqlite3.Connection, path: str, truncate_above: int, busy_timeout_ms: int
) -> WalCheckpoint:
    """``passive``, then a truncating checkpoint if it completed and the file is over
    ``truncate_above`` bytes (``busy_timeout_ms``: the connection's own, restored after)."""
    done = passive(conn, path)
    if not done.complete or done.wal_bytes <= truncate_above:
        return done
    conn.execute(fill(sql.PRAGMA_BUSY_TIMEOUT, ms=str(TRUNCATE_WAIT_MS)))
    try:
        busy = conn.execute(sql.WAL_CHECKPOINT_TRUNCATE).fetchone()[0]
    finally:
        conn.execute(fill(sql.PRAGMA_BUSY_TIMEOUT, ms=str(busy_timeout_ms)))
    return dataclasses.replace(done, truncated_to=None if busy else wal_bytes(path))


def held(conn: sqlite3.Connection, path: str) -> StorageHold | None:
    """The log as a statistics reading reports it: held when it is WAL_HELD_MIN_BYTES or more
    and a passive checkpoint cannot copy that much of it back (none is tried on a smaller
    file)."""
    size = wal_bytes(path)
    if size < WAL_HELD_MIN_BYTES:
        return None
    done = passive(conn, path)
    if done.complete is not False or done.pending_bytes < WAL_HELD_MIN_BYTES:
        return None
    return StorageHold("wal", wal_bytes=done.wal_bytes, wal_pending_bytes=done.pending_bytes)
