"""SQLite's named statements (``_backends/sqlite/queries/*.sql``): each one compiles on a real
migrated file (``EXPLAIN``; a template filled in with real names, as its code fills it), each
one is used by the package's code, and every name the code uses is one of them."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import fields
from pathlib import Path

import skiplock
from skiplock._backends.sql_files import fill, listing, repeat
from skiplock._backends.sqlite import statements
from skiplock._backends.sqlite.completion import job_finish_into
from skiplock._backends.sqlite.statements import STATEMENTS, Statements
from skiplock._backends.sqlite.storage import history

from .helpers import sql_strings

PACKAGE = Path(statements.__file__).parent

KEPT_FOR_PARITY = {
    # named as PostgreSQL names its twin (tests/backends/test_statements.py), where its code
    # runs it; SQLite's code runs another: JOB_INSERT_UNIQUE, JOB_HOLDER_OF, the snapshot's
    # own :now
    "JOB_INSERT",
    "JOB_LIVE_BY_UNIQUE_KEY",
    "JOB_STATS_NOW",
}

PIECE = re.compile(r"^(VIEW_|FINISH_|DAY_COLUMN)")
"""Pieces of a statement the code fills in (the view and its triggers, a finish moved to its
day's table, a day table's columns): compiled as the whole statement they make, below."""

PIECES = {"JOB_INSERT_ROW", "JOB_GET_AVAILABLE_IN_QUEUES_BRANCH", "SCHEMA_TABLE_SQL_REPLACE"}

PARTS = {
    "TRANSACTION_BEGIN_AS": {"mode": "DEFERRED"},
    "PRAGMA_BUSY_TIMEOUT": {"ms": "100"},
    "PRAGMA_SYNCHRONOUS": {"mode": "NORMAL"},
    "PRAGMA_SCHEMA_VERSION_SET": {"version": "1"},
    "TABLE_INFO": {"table": "skiplock_jobs_live"},
    "DAY_ADD_COLUMN": {"table": "{day}", "column": "probe", "kind": "TEXT"},
    "DAY_CREATE": {"table": "skiplock_jobs_done_p20000101", "columns": "id INTEGER PRIMARY KEY"},
    "DAY_FINISHED_INDEX": {"table": "probe"},
    "DAY_RECLAIMED_INDEX": {"table": "probe"},
    "DAY_MOVE_BACK": {"table": "{day}", "columns": "{columns}"},
    "DAY_DELETE_ONE": {"table": "{day}"},
    "DAY_COUNT": {"table": "{day}"},
    "DAY_DROP": {"table": "{day}"},
    "DAY_PRUNE": {"table": "{day}"},
}
"""Each template's parts, as its code fills them in (``{day}``: a real day table; ``{columns}``:
the live table's)."""


def filled(name: str, day: str, columns: str) -> str:
    """The statement ``name`` as the code runs it."""
    text: str = getattr(STATEMENTS, name)
    if name == "JOB_INSERT_ROWS":
        return fill(text, n="2", rows=repeat(STATEMENTS.JOB_INSERT_ROW, 2, ", "))
    if name == "JOB_GET_AVAILABLE_IN_QUEUES":
        return statements.job_get_available_in_queues(2)
    if name == "FINISH_INTO":
        return job_finish_into(day, tuple(columns.split(", ")), True)
    parts = {
        k: v.replace("{day}", day).replace("{columns}", columns)
        for k, v in PARTS.get(name, {}).items()
    }
    return fill(text, **parts) if parts else text


def arguments(text: str) -> dict[str, None] | tuple[None, ...]:
    """Nothing for each of the statement's parameters (named, or ``?``)."""
    code = re.sub(r"--[^\n]*", "", text)
    code = re.sub(r"'[^']*'", "''", code)
    named = re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", code)
    if named:
        return dict.fromkeys(named)
    return (None,) * code.count("?")


def uses() -> set[str]:
    """Every statement name the package's Python reads (``sql.NAME``, ``STATEMENTS.NAME``)."""
    found: set[str] = set()
    for file in PACKAGE.rglob("*.py"):
        code = file.read_text(encoding="utf-8")
        found |= set(re.findall(r"\b(?:sql|STATEMENTS)\.([A-Z][A-Z0-9_]*)\b", code))
    return found


def test_every_named_statement_is_used_and_every_use_is_named() -> None:
    names = {f.name for f in fields(Statements)}
    assert uses() - names == set(), "a use of a statement no file names"
    assert names - uses() - KEPT_FOR_PARITY == set(), "a named statement no code uses"
    assert names >= KEPT_FOR_PARITY


async def test_every_named_statement_compiles_on_a_migrated_file(sqlite_url: str) -> None:
    app = skiplock.App(sqlite_url)
    await app.migrate()
    await app.close()
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    conn.create_function("skiplock_lower", 1, str.lower)
    conn.create_function("skiplock_id_floor", 1, lambda _table: 0)
    failed: dict[str, str] = {}
    try:
        conn.execute("BEGIN IMMEDIATE")
        day = history.ensure_day(conn, history.day_of(1000))  # the view rebuilt: its DDL runs
        conn.execute("CREATE TABLE probe (finished_at REAL, reclaimed_at REAL)")
        conn.execute("COMMIT")
        columns = listing(name for name, _ in history.columns(conn))
        for field in fields(Statements):
            if field.name in PIECES or PIECE.match(field.name):
                continue
            text = filled(field.name, day, columns)
            try:
                conn.execute("EXPLAIN " + text, arguments(text)).fetchall()
            except sqlite3.Error as exc:
                failed[field.name] = str(exc)
        conn.execute("PRAGMA writable_schema = ON")  # the one statement that needs it
        conn.execute("EXPLAIN " + STATEMENTS.SCHEMA_TABLE_SQL_REPLACE, ("a", "b")).fetchall()
        conn.execute("PRAGMA writable_schema = OFF")
        conn.execute("BEGIN IMMEDIATE")  # the view's DDL runs (EXPLAIN would find it made)
        history.rebuild_view(conn)
        conn.execute("ROLLBACK")
    finally:
        conn.close()
    assert failed == {}


def test_no_sql_text_in_the_packages_python() -> None:
    """Every statement is in a ``.sql`` file: no string in the package's code (docstrings
    aside) says a word of SQL, so none is written or assembled in Python."""
    assert sql_strings(PACKAGE) == []
