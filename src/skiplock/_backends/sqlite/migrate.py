"""SQLite's migrations: the numbered files of ``migrations/`` (``-- migration: NAME`` and the
body, never edited once released), applied in order, each statement by statement, inside one
write transaction; migration 16 also widens the live table's state CHECK."""

from __future__ import annotations

import sqlite3

from ...errors import ConfigurationError
from ..sql_files import fill, load_migrations
from .connection import Connected
from .connection import immediate as _immediate
from .statements import STATEMENTS as sql
from .storage import history

MIGRATIONS: list[tuple[int, str, str]] = [
    (m.version, m.name, m.body) for m in load_migrations(__package__ or "skiplock._backends.sqlite")
]
"""Every released migration (version, recorded name, body), from ``migrations/NNNN.sql``."""


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
"""The migration that lets the live table hold waiting jobs (workflow.py)."""


_OLD_CHECK = "CHECK (state IN ('pending', 'running', 'succeeded', 'cancelled', 'dead'))"
_NEW_CHECK = "CHECK (state IN ('pending', 'running', 'succeeded', 'cancelled', 'dead', 'waiting'))"


def widen_state_check(conn: sqlite3.Connection) -> None:
    """Let the live table hold ``waiting`` rows: its stored CREATE TABLE's state CHECK gains
    the word (sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema Changes":
    a constraint every existing row meets may be loosened by editing the schema text, then
    bumping ``schema_version`` so every connection reads it again). Runs inside the
    migration's transaction."""
    (version,) = conn.execute(sql.PRAGMA_SCHEMA_VERSION).fetchone()
    conn.execute(sql.PRAGMA_WRITABLE_SCHEMA_ON)
    try:
        conn.execute(sql.SCHEMA_TABLE_SQL_REPLACE, (_OLD_CHECK, _NEW_CHECK))
        conn.execute(fill(sql.PRAGMA_SCHEMA_VERSION_SET, version=str(int(version) + 1)))
    finally:
        conn.execute(sql.PRAGMA_WRITABLE_SCHEMA_OFF)


HISTORY_APART = 11
"""The migration that put the finished jobs apart (storage/history.py): from it on, a migration
applied rebuilds the view over the job tables."""


class Migrating(Connected):
    """migrate() and schema_version()."""

    async def migrate(self) -> list[int]:
        def migrate(conn: sqlite3.Connection) -> list[int]:
            applied: list[int] = []
            with _immediate(conn):
                conn.execute(sql.MIGRATIONS_TABLE)
                done = {r[0] for r in conn.execute(sql.MIGRATION_VERSIONS)}
                for version, name, body in MIGRATIONS:
                    if version not in done:
                        for statement in _statements(body):
                            conn.execute(statement)
                        if version == WORKFLOWS_MIGRATION:
                            widen_state_check(conn)
                        conn.execute(
                            sql.MIGRATION_RECORD,
                            {"version": version, "name": name, "now": self._now()},
                        )
                        applied.append(version)
                if applied and max(done | set(applied)) >= HISTORY_APART:
                    history.follow_live(conn)  # day tables' columns, the view, its triggers
            return applied

        return await self._run("migrate", migrate)

    async def database_number(self, number: int) -> int:
        if number != 0:
            raise ConfigurationError(
                f"database number {number}: several databases are PostgreSQL's (SQLite "
                "serves one machine, as database 0)"
            )
        return 0

    async def database_number_on(self, connection: object) -> int | None:
        return 0  # one database: any connection to this file is to it

    def database_number_on_sync(self, connection: object) -> int | None:
        return 0

    async def schema_version(self) -> tuple[int, int]:
        def version(conn: sqlite3.Connection) -> int:
            if not conn.execute(sql.MIGRATIONS_TABLE_EXISTS).fetchone()[0]:
                return 0
            return int(conn.execute(sql.SCHEMA_VERSION).fetchone()[0])

        current = await self._run("schema_version", version)
        return current, MIGRATIONS[-1][0]
