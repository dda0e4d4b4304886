"""The raw ceiling: the simplest queue on the same database, with none of skiplock's safety.

One table ``(id, kind, state)``; enqueue is one INSERT committed on its own; the worker
claims 500 rows (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite),
runs them one after another and deletes them in one statement. No leases, heartbeats,
attempts, retries, history, NOTIFY or thread hop: what the database and driver allow, so
every skiplock figure can be printed as a fraction of it measured in the same run (issue
15). Only the no-op kind exists: W1 and W2 use it.
"""

from __future__ import annotations

import sqlite3
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .adapters import Adapter, NotSupported
from .common import REC

BATCH = 500
PG_TABLE = "CREATE TABLE raw_jobs (id bigserial PRIMARY KEY, kind text NOT NULL, state text "
PG_TABLE += "NOT NULL DEFAULT 'pending'); CREATE INDEX ON raw_jobs (id) WHERE state = 'pending'"
PG_CLAIM = """UPDATE raw_jobs SET state = 'running' WHERE id IN (
    SELECT id FROM raw_jobs WHERE state = 'pending' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING id, kind"""
SQLITE_TABLE = """CREATE TABLE IF NOT EXISTS raw_jobs (id INTEGER PRIMARY KEY, kind TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending');
CREATE INDEX IF NOT EXISTS raw_pending ON raw_jobs (id) WHERE state = 'pending'"""
SQLITE_CLAIM = """UPDATE raw_jobs SET state = 'running' WHERE id IN (
    SELECT id FROM raw_jobs WHERE state = 'pending' ORDER BY id LIMIT ?) RETURNING id, kind"""


def _run(kind: str) -> None:
    if kind != "noop":
        raise NotSupported(f"the raw ceiling runs no-op jobs only, not {kind!r}")
    REC.start()
    REC.end()


class CeilingAdapter(Adapter):
    name = "raw ceiling"

    def __init__(self, url: str, opts: dict[str, Any]) -> None:
        super().__init__(url, opts)
        self.sqlite = url.startswith("sqlite")
        self.pool: Any = None
        self.conn: sqlite3.Connection | None = None

    async def install(self) -> None:
        if self.conn is not None:
            self.conn.executescript(SQLITE_TABLE)
        else:
            await self.pool.execute(f"DROP TABLE IF EXISTS raw_jobs; {PG_TABLE}")

    async def open(self) -> None:
        if not self.sqlite:
            import asyncpg

            self.pool = await asyncpg.create_pool(self.url, min_size=1, max_size=2)
            return
        parts = urlsplit(self.url)
        sync = parse_qs(parts.query).get("synchronous", ["full"])[-1]
        self.conn = sqlite3.connect(parts.path[1:], isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {sync}")

    async def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        if self.pool is not None:
            await self.pool.close()

    async def enqueue(self, kind: str, seq: int | None = None) -> None:
        if self.conn is None:
            await self.pool.execute("INSERT INTO raw_jobs (kind) VALUES ($1)", kind)
            return
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO raw_jobs (kind) VALUES (?)", (kind,))
        self.conn.execute("COMMIT")

    async def enqueue_bulk(self, kind: str, n: int) -> None:
        if self.conn is None:
            await self.pool.execute(
                "INSERT INTO raw_jobs (kind) SELECT $1 FROM generate_series(1, $2)", kind, n
            )
            return
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany("INSERT INTO raw_jobs (kind) VALUES (?)", [(kind,)] * n)
        self.conn.execute("COMMIT")

    async def work(self, *, burst: bool) -> None:
        if not burst:
            raise NotSupported("the raw ceiling only drains (burst)")
        while rows := await self._claim():
            for _, kind in rows:
                _run(kind)
            await self._delete([r[0] for r in rows])

    async def _claim(self) -> list[tuple[int, str]]:
        if self.conn is None:
            return [(r[0], r[1]) for r in await self.pool.fetch(PG_CLAIM, BATCH)]
        self.conn.execute("BEGIN IMMEDIATE")
        rows = self.conn.execute(SQLITE_CLAIM, (BATCH,)).fetchall()
        self.conn.execute("COMMIT")
        return rows

    async def _delete(self, ids: list[int]) -> None:
        if self.conn is None:
            await self.pool.execute("DELETE FROM raw_jobs WHERE id = ANY($1::bigint[])", ids)
            return
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany("DELETE FROM raw_jobs WHERE id = ?", [(i,) for i in ids])
        self.conn.execute("COMMIT")

    def stop(self) -> None:
        raise NotSupported("the raw ceiling only drains (burst)")

    def settings(self) -> str:
        return f"claim {BATCH}, run in turn, delete {BATCH}; no safety"
