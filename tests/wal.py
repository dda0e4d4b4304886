"""The WAL one test's PostgreSQL schema took: the bytes of the WAL records that change its own
tables, indexes and TOAST tables, read back with ``pg_walinspect`` (PostgreSQL 15's contrib).

Why not ``pg_current_wal_lsn()`` differences alone: they count every write on the server, and
the tests of others run beside ours (tens of MB in the seconds a loop takes), so a bound on
them would be a bound on the machine's load. The records of our relations are ours alone.

The extension is created in the test's own schema (dropped with it) if no schema holds it
yet; a session advisory lock serialises the tests that use it, so one never drops it from
under another. A temporary physical replication slot holds the WAL from the meter's start
until its connection closes: the server recycles segments at each checkpoint, and the
others' writes bring checkpoints within seconds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg

LOCK = "hashtext('skiplock tests: pg_walinspect')"

RELATIONS = """
-- every relation of the schema (partitions, indexes) and their TOAST tables and indexes
SELECT c.relfilenode FROM pg_class c WHERE c.relnamespace = $1::regnamespace
  AND c.relfilenode <> 0
UNION
SELECT t.relfilenode FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid
WHERE c.relnamespace = $1::regnamespace
UNION
SELECT ti.relfilenode FROM pg_class c JOIN pg_index i ON i.indrelid = c.reltoastrelid
JOIN pg_class ti ON ti.oid = i.indexrelid
WHERE c.relnamespace = $1::regnamespace
"""


@dataclass
class WalMeter:
    """``mark()`` a moment; ``since(mark)`` is the WAL written to the schema's relations."""

    conn: asyncpg.Connection
    schema: str
    extension: str
    database: int
    nodes: set[int]

    async def flushed(self) -> int:
        # a transaction that takes an xid commits synchronously, flushing every record
        # before it (a release commits with synchronous_commit off)
        await self.conn.execute("SELECT pg_current_xact_id()")
        return int(await self.conn.fetchval("SELECT pg_current_wal_flush_lsn()"))

    async def mark(self) -> int:
        self.nodes |= {r[0] for r in await self.conn.fetch(RELATIONS, self.schema)}
        return await self.flushed()

    async def since(self, start: int) -> int:
        end = await self.flushed()
        self.nodes |= {r[0] for r in await self.conn.fetch(RELATIONS, self.schema)}
        found = await self.conn.fetchval(
            f"""SELECT coalesce(sum(r.record_length), 0)
            FROM "{self.extension}".pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) r
            WHERE substring(r.block_ref from 'rel \\d+/{self.database}/(\\d+)')::oid
                  = ANY($3::oid[])""",
            start,
            end,
            sorted(self.nodes),
        )
        return int(found)


@asynccontextmanager
async def wal_meter(dsn: str, schema: str) -> AsyncIterator[WalMeter]:
    """A meter of ``schema``'s WAL on its own connection (``dsn``: the server, no schema)."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"SELECT pg_advisory_lock({LOCK})")
        where = await conn.fetchval(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'pg_walinspect'"
        )
        if where is None:
            await conn.execute(f'CREATE EXTENSION pg_walinspect SCHEMA "{schema}"')
            where = schema
        database = await conn.fetchval(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        )
        slot = f"skiplock_test_{schema}"[:63]
        await conn.execute(
            "SELECT pg_create_physical_replication_slot($1, true, true)", slot
        )  # reserved now, temporary: gone with this connection
        try:
            yield WalMeter(conn, schema, where, int(database), set())
        finally:
            if where == schema:  # not left for a test that would use it as its schema goes
                await conn.execute("DROP EXTENSION pg_walinspect")
    finally:
        await conn.execute(f"SELECT pg_advisory_unlock({LOCK})")
        await conn.close()
