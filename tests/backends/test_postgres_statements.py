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
from skiplock._backends.postgres.storage.generations import (
    GEN_LAST,
    GENERATION_DDL,
    LONG_SEGMENT,
    generation_sql,
    segment_name,
    wrapper_name,
)
from skiplock._backends.postgres.storage.partitions import DAY_CREATE, DAY_DROP, day_name
from skiplock._backends.postgres.url import parse_postgres_url
from skiplock._backends.sql_files import Filler, fill_names, with_schema

from .helpers import sql_strings

PACKAGE = Path(statements.__file__).parent

USE = re.compile(r"\b(?:_sql|_wf|sql|statements)\.([A-Z][A-Z0-9_]*)\b")
"""A statement read off a registry in the package's code (``self._sql.NAME``, ``self._wf.NAME``,
``sql.NAME``, ``statements.NAME``)."""

NOT_STATEMENTS = {"COPY_COLUMNS", "MIGRATIONS", "QUERIES", "RELEASE_CHUNK"}
"""The statements module's other constants, read as ``sql.NAME`` too."""

TWIN_ONLY = {"JOB_STATS_NOW"}
"""Named for SQLite's twin alone (tests/backends/test_statements.py): PostgreSQL's reading takes
its now with its snapshot (storage/reads.py), so no code of this package runs it."""

PLACEHOLDER = re.compile(r"\{(?!s\})[a-z_]+\}")
"""A template's name other than the schema's (a generation's, a day's): filled by sql_files.fill."""

QUERY = re.compile(r"\A(?:--[^\n]*\n|\s)*(SELECT|WITH|INSERT|UPDATE|DELETE)\b")
"""A statement PREPARE takes; the others (DDL, LOCK, SET) run in a transaction rolled back."""

OUTSIDE_A_TRANSACTION = {
    "GENERATION_DETACH",
    "GENERATION_DETACH_FINALIZE",
    "WRAPPER_LEAVE_LIVE",
    "WRAPPER_LEAVE_LIVE_FINALIZE",
    "LIVE_VACUUM",
}
"""A detach CONCURRENTLY (or its FINALIZE, of a pending one) and a VACUUM run in no transaction
block: the rotation and the hot vacuum run them (tests/backends/test_storage.py,
tests/test_vacuumer.py), filled as these are."""

IN_ITS_PLACE_ONLY = {"IMPORT_SNAPSHOT"}
"""A snapshot's import must be the first statement of a repeatable read transaction and name a
snapshot another open transaction exported: it runs only where it is read (storage/reads.py's
``split``, run by tests/test_readers.py and tests/test_storage_holds.py)."""


async def _check(conn: asyncpg.Connection, filled: str) -> None:
    """PREPARE ``filled`` (then let it go), or run it where PREPARE takes no such statement."""
    if QUERY.match(filled):
        await conn.execute(f"PREPARE checked AS {filled}")
        await conn.execute("DEALLOCATE checked")
    else:
        await conn.execute(filled)


async def test_every_named_statement_prepares_on_a_migrated_schema(pg_url: str) -> None:
    backend = PostgresBackend(pg_url)
    await backend.open()
    try:
        await backend.migrate()
    finally:
        await backend.close()
    parsed = parse_postgres_url(pg_url)
    schema = parsed.schema
    everything = {**statements.QUERIES, **storage.QUERIES}
    templates = {name for name, text in everything.items() if PLACEHOLDER.search(text)}
    # the templates, filled with a real generation's and day's names, in the order they run;
    # the rotation's with the generation's names, the drop of a table last
    day = date(2999, 12, 31)
    table, wrapper = segment_name(GEN_LAST), wrapper_name(GEN_LAST)
    names: dict[str, Filler] = {"table": table, "wrapper": wrapper, "segment": GEN_LAST}
    names |= {"long": LONG_SEGMENT, "ms": 10, "columns": ["id", "queue"], "picked": ["id", 3]}
    made = [
        *zip(GENERATION_DDL, generation_sql(schema, GEN_LAST), strict=True),
        *zip(DAY_CREATE, partitions._create_sql(schema, day), strict=True),
        *zip(DAY_DROP, partitions._drop_sql(schema, day_name(day)), strict=True),
    ]
    # the claims a worker names (storage/sight.py), as it runs them: their segments named, in
    # CLAIM_WITH_POINTER (their text as the registry holds it, every live segment, runs below)
    named = (LONG_SEGMENT, GEN_LAST)
    made += [
        (name, statements.named_claim(schema, claim, named))
        for name, claim in (
            ("CLAIM_WITH_POINTER", "JOB_GET_AVAILABLE"),
            ("JOB_GET_AVAILABLE_IN_QUEUES", "JOB_GET_AVAILABLE_IN_QUEUES"),
            ("JOB_GET_AVAILABLE", "JOB_GET_AVAILABLE"),
        )
    ]
    done = {name for name, _ in made} | OUTSIDE_A_TRANSACTION | IN_ITS_PLACE_ONLY
    rest = sorted(templates - done, key=lambda name: name == "DETACHED_DROP")
    run = [*made, *((name, fill_names(everything[name], schema, **names)) for name in rest)]
    assert {name for name, _ in run} == templates - OUTSIDE_A_TRANSACTION - IN_ITS_PLACE_ONLY
    conn = await asyncpg.connect(parsed.dsn)
    refused: dict[str, str] = {}
    try:
        for name, text in everything.items():
            if name in templates or name in OUTSIDE_A_TRANSACTION | IN_ITS_PLACE_ONLY:
                continue
            transaction = conn.transaction()
            await transaction.start()
            try:
                await _check(conn, with_schema(text, schema))
            except asyncpg.PostgresError as exc:
                refused[name] = f"{type(exc).__name__}: {exc}"
            finally:
                await transaction.rollback()
        transaction = conn.transaction()
        await transaction.start()
        try:
            for name, filled in run:
                try:
                    await _check(conn, filled)
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
    if "named_claim(" in (PACKAGE / "claim.py").read_text(encoding="utf-8"):
        # the ordinary claims run through statements.named_claim, by name, in its wrapper
        used |= {*statements.NAMED_CLAIMS, "CLAIM_WITH_POINTER"}
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

NAMED = re.compile(r"\"([A-Z][A-Z0-9_]+)\"")
"""A statement's name as a string in ``storage/``'s code (``QUERIES["NAME"]``, or a list of
names run in order)."""


def test_every_storage_statement_is_used_and_every_use_is_named() -> None:
    used: set[str] = set()
    read: set[str] = set()
    for path in (PACKAGE / "storage").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        used |= set(NAMED.findall(text))
        read |= set(STORAGE_USE.findall(text))
    assert set(storage.QUERIES) - used == set(), "named in storage/queries/*.sql, used nowhere"
    assert read - set(storage.QUERIES) == set(), "used, named in no storage/queries/*.sql"


def test_no_sql_text_in_the_packages_python() -> None:
    """Every statement is in a ``.sql`` file: no string in the package's code (docstrings
    aside) says a word of SQL, so none is written or assembled in Python (SQLite's package is
    held to the same, test_sqlite_statements.py)."""
    assert sql_strings(PACKAGE) == []
