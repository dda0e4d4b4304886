"""Which database errors are outages (retried) and which are not (stop, and say why).

An outage is the database being unreachable or busy for a while: workers back off and retry.
A missing schema is a SchemaError telling the person to run ``skiplock migrate``. Anything
else (a column missing, a constraint broken) is a plain BackendError, retried by nobody.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

import skiplock
from skiplock import Worker
from skiplock._backends.sqlite.errors import wrapped
from skiplock.errors import BackendError, BackendUnavailable, SchemaError


async def test_enqueue_before_migrate_says_to_migrate(db_url: str) -> None:
    app = skiplock.App(db_url)

    @app.task(name="t")
    async def t() -> None: ...

    try:
        with pytest.raises(SchemaError, match="skiplock migrate"):
            await t.aenqueue()
    finally:
        await app.close()


def test_a_busy_sqlite_file_is_an_outage(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        with pytest.raises(BackendUnavailable), wrapped("claim"):
            other.execute("BEGIN IMMEDIATE")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        other.close()


def test_an_unopenable_sqlite_file_is_an_outage(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable), wrapped("connect"):
        sqlite3.connect(tmp_path / "no" / "such" / "dir.db").execute("SELECT 1")


@pytest.fixture
async def broken_sqlite(sqlite_url: str) -> str:
    """A migrated file from which a column the claim writes has gone."""
    app = skiplock.App(sqlite_url)
    await app.migrate()
    await app.close()
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    conn.execute("DROP VIEW skiplock_jobs")  # it names every column
    conn.execute("ALTER TABLE skiplock_jobs_live DROP COLUMN locked_by")
    conn.execute("CREATE VIEW skiplock_jobs AS SELECT * FROM skiplock_jobs_live")
    conn.close()
    return sqlite_url


async def test_a_missing_column_is_not_an_outage(broken_sqlite: str) -> None:
    app = skiplock.App(broken_sqlite)
    try:
        with pytest.raises(BackendError, match="no such column") as caught:
            await app.list_jobs()
        assert not isinstance(caught.value, BackendUnavailable)
    finally:
        await app.close()


async def test_a_worker_stops_on_an_error_that_retrying_cannot_fix(broken_sqlite: str) -> None:
    app = skiplock.App(broken_sqlite)

    @app.task(name="t")
    async def t() -> None: ...

    try:
        with pytest.raises(BaseException) as caught:
            await asyncio.wait_for(Worker(app, poll_interval_s=0.05).run(), timeout=30)
        errors = getattr(caught.value, "exceptions", [caught.value])
        assert any("no such column" in str(e) for e in errors), errors
    finally:
        await app.close()
