"""PostgreSQL's statements kept as SQL (issue 45): every named statement of ``queries/*.sql``
prepares on a freshly migrated schema, and the names the package's code uses are exactly the
names the files hold."""

from __future__ import annotations

import re
from dataclasses import fields
from datetime import date
from pathlib import Path

import asyncpg

from skiplock._backends.postgres import PostgresBackend, statements, storage
from skiplock._backends.postgres.storage import partitions
from skiplock._backends.postgres.storage.generations import GEN_LAST, GENERATION_DDL, generation_sql
from skiplock._backends.postgres.storage.partitions import DAY_CREATE, DAY_DROP
from skiplock._backends.postgres.url import parse_postgres_url
from skiplock._backends.sql_files import with_schema

PACKAGE = Path(statements.__file__).parent

USE = re.compile(r"\b(?:_sql|_wf|sql|statements)\.([A-Z][A-Z0-9_]*)\b")
"""A statement read off a registry in the package's code (``self._sql.NAME``, ``self._wf.NAME``,
``sql.NAME``, ``statements.NAME``)."""

NOT_STATEMENTS = {"COPY_COLUMNS", "MIGRATIONS", "QUERIES", "RELEASE_CHUNK"}
"""The statements module's other constants, read as ``sql.NAME`` too."""

TWIN_ONLY = {"JOB_STATS_NOW"}
"""Named for SQLite's twin alone (tests/backends/test_statements.py): PostgreSQL's reading takes
its now with its snapshot (storage/reads.py), so no code of this package runs it."""

DDL = re.compile(r"\A(?:--[^\n]*\n|\s)*(CREATE|ALTER|DROP)\b")
"""A utility statement, which PREPARE does not take: it is run in a transaction rolled back."""


async def test_every_named_statement_prepares_on_a_migrated_schema(pg_url: str) -> None:
    backend = PostgresBackend(pg_url)
    await backend.open()
    try:
        await backend.migrate()
    finally:
        await backend.close()
    parsed = parse_postgres_url(pg_url)
    conn = await asyncpg.connect(parsed.dsn)
    refused: dict[str, str] = {}
    try:
        templates = {*GENERATION_DDL, *DAY_CREATE, *DAY_DROP}
        plain = {k: v for k, v in storage.QUERIES.items() if k not in templates}
        for name, text in {**statements.QUERIES, **plain}.items():
            filled = with_schema(text, parsed.schema)
            try:
                if DDL.match(filled):
                    transaction = conn.transaction()
                    await transaction.start()
                    try:
                        await conn.execute(filled)
                    finally:
                        await transaction.rollback()
                else:
                    await conn.execute(f"PREPARE checked AS {filled}")
                    await conn.execute("DEALLOCATE checked")
            except asyncpg.PostgresError as exc:
                refused[name] = f"{type(exc).__name__}: {exc}"
        # the templates, filled with a real generation's and day's names, in the order they run
        day = date(2999, 12, 31)
        run = [
            *zip(GENERATION_DDL, generation_sql(parsed.schema, GEN_LAST), strict=True),
            *zip(DAY_CREATE, partitions._create_sql(parsed.schema, day), strict=True),
            *zip(
                DAY_DROP, partitions._drop_sql(parsed.schema, partitions.day_name(day)), strict=True
            ),
        ]
        transaction = conn.transaction()
        await transaction.start()
        try:
            for name, filled in run:
                try:
                    await conn.execute(filled)
                except asyncpg.PostgresError as exc:
                    refused[name] = f"{type(exc).__name__}: {exc}"
                    break
        finally:
            await transaction.rollback()
    finally:
        await conn.close()
    assert refused == {}
    assert len(statements.QUERIES) > 100 and len(storage.QUERIES) > 10


def test_every_named_statement_is_used_and_every_use_is_named() -> None:
    used: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        used |= set(USE.findall(path.read_text(encoding="utf-8")))
    named = set(statements.QUERIES)
    assert named - used - TWIN_ONLY == set(), "named in queries/*.sql, used nowhere"
    assert named >= TWIN_ONLY
    assert used - NOT_STATEMENTS - named == set(), "used, named in no queries/*.sql"


def test_each_named_statement_is_in_one_registry() -> None:
    plain = {f.name for f in fields(statements.Statements)}
    workflow = {f.name for f in fields(statements.WorkflowStatements)}
    assert plain & workflow == set()
    assert plain | workflow == set(statements.QUERIES)


STORAGE_USE = re.compile(r"\bQUERIES\[\"([A-Z][A-Z0-9_]*)\"\]")
"""A storage statement read by name (``QUERIES["NAME"]``) in ``storage/``'s modules."""


def test_every_storage_statement_is_used_and_every_use_is_named() -> None:
    used: set[str] = set()
    for path in (PACKAGE / "storage").glob("*.py"):
        used |= set(STORAGE_USE.findall(path.read_text(encoding="utf-8")))
    used |= {*GENERATION_DDL, *DAY_CREATE, *DAY_DROP}  # the templates, run in those orders
    assert set(storage.QUERIES) - used == set(), "named in storage/queries/*.sql, used nowhere"
    assert used - set(storage.QUERIES) == set(), "used, named in no storage/queries/*.sql"
