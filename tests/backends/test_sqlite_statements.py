"""SQLite's named statements (``_backends/sqlite/queries/*.sql``): each one compiles on a real
migrated file (``EXPLAIN``), each one is used by the package's code, and every name the code
uses is one of them."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import fields
from pathlib import Path

import skiplock
from skiplock._backends.sql_files import fill, repeat
from skiplock._backends.sqlite import statements
from skiplock._backends.sqlite.statements import STATEMENTS, Statements

PACKAGE = Path(statements.__file__).parent

KEPT_FOR_PARITY = {
    # named as PostgreSQL names its twin (tests/backends/test_statements.py), where its code
    # runs it; SQLite's code runs another: JOB_INSERT_UNIQUE, JOB_HOLDER_OF, the snapshot's
    # own :now
    "JOB_INSERT",
    "JOB_LIVE_BY_UNIQUE_KEY",
    "JOB_STATS_NOW",
}

PIECES = {
    # not statements: what a template repeats (sql_files.repeat), explained filled in below
    "JOB_INSERT_ROW",
    "JOB_GET_AVAILABLE_IN_QUEUES_BRANCH",
}


def filled(name: str) -> str:
    """The statement ``name`` as the code runs it: a template filled in as its code fills it."""
    text: str = getattr(STATEMENTS, name)
    if name == "JOB_INSERT_ROWS":
        return fill(text, n="2", rows=repeat(STATEMENTS.JOB_INSERT_ROW, 2, ", "))
    if name == "JOB_GET_AVAILABLE_IN_QUEUES":
        return statements.job_get_available_in_queues(2)
    return text


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
        for field in fields(Statements):
            if field.name in PIECES:
                continue
            text = filled(field.name)
            try:
                conn.execute("EXPLAIN " + text, arguments(text)).fetchall()
            except sqlite3.Error as exc:
                failed[field.name] = str(exc)
    finally:
        conn.close()
    assert failed == {}
