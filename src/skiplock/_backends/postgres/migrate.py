"""PostgreSQL's migrations (``migrations/NNNN.sql``) run in order, and the schema version."""

from __future__ import annotations

from typing import Any

import asyncpg

from ..._lanes import ID_SPAN
from ..sql_files import quote_identifier, with_schema
from . import rows as ops
from . import statements as sql
from .errors import wrapped as _wrapped
from .storage.operations import StorageOperations


class Migrate(StorageOperations):
    """Migrations and the schema version."""

    async def migrate(self) -> list[int]:
        applied: list[int] = []
        with _wrapped("migrate"):
            async with self.pool.acquire() as conn, conn.transaction():
                # The lock first (its key is the schema's name, which need not exist yet):
                # concurrent CREATE SCHEMA IF NOT EXISTS race on pg_namespace's unique index.
                await conn.execute(self._sql.MIGRATIONS_LOCK, self.schema)
                await conn.execute(self._sql.SCHEMA_CREATE)
                await conn.execute(self._sql.MIGRATIONS_TABLE)
                done = {r["version"] for r in await conn.fetch(self._sql.MIGRATION_VERSIONS)}
                for migration in sql.MIGRATIONS:
                    if migration.version not in done:
                        await conn.execute(with_schema(migration.body, self.schema))
                        await conn.execute(
                            self._sql.MIGRATION_RECORD, migration.version, migration.name
                        )
                        applied.append(migration.version)
        await self._make_ahead("migrate", analyze=False)  # before the first job finishes
        return applied

    async def database_number(self, number: int) -> int:
        with _wrapped("database_number"):
            row = await self.pool.fetchrow(self._sql.DATABASE_NUMBER, number, ID_SPAN)
        assert row is not None
        return int(row["number"])

    async def database_number_on(self, connection: object) -> int | None:
        quoted = quote_identifier(self.schema)
        with _wrapped("database_number_on"):
            if isinstance(connection, asyncpg.Connection | asyncpg.pool.PoolConnectionProxy):
                if not await connection.fetchval(self._sql.DATABASE_NUMBER_TABLE, quoted):
                    return None
                got = await connection.fetchval(self._sql.DATABASE_NUMBER_READ)
                return None if got is None else int(got)
            conn: Any = connection  # a psycopg async connection
            cursor = await conn.execute(
                ops.to_psycopg(self._sql.DATABASE_NUMBER_TABLE), {"p1": quoted}
            )
            if not (await cursor.fetchone())[0]:
                return None
            row = await (await conn.execute(self._sql.DATABASE_NUMBER_READ)).fetchone()
            return None if row is None else int(row[0])

    def database_number_on_sync(self, connection: object) -> int | None:
        quoted = quote_identifier(self.schema)
        conn: Any = connection  # a psycopg connection
        with _wrapped("database_number_on"):
            table = ops.to_psycopg(self._sql.DATABASE_NUMBER_TABLE)
            if not conn.execute(table, {"p1": quoted}).fetchone()[0]:
                return None
            row = conn.execute(self._sql.DATABASE_NUMBER_READ).fetchone()
        return None if row is None else int(row[0])

    async def schema_version(self) -> tuple[int, int]:
        latest = sql.MIGRATIONS[-1].version
        with _wrapped("schema_version"):
            quoted = quote_identifier(self.schema)
            if not await self.pool.fetchval(self._sql.MIGRATIONS_TABLE_EXISTS, quoted):
                return 0, latest
            current = await self.pool.fetchval(self._sql.SCHEMA_VERSION)
        return int(current), latest
