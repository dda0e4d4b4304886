"""Fixtures: every ``db_url`` test runs once on a SQLite file and once on PostgreSQL.

PostgreSQL tests each get their own schema (dropped afterwards), on the server named by
``SKIPLOCK_TEST_POSTGRES_URL`` (default: the local server). An unreachable server is an error,
never a skip: a suite that silently stopped testing PostgreSQL would look green.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

import skiplock

from .helpers import FakeClock

PG_URL = os.environ.get("SKIPLOCK_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


async def _pg_admin(statement: str) -> None:
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        asyncio.run(_pg_admin(f'CREATE SCHEMA "{schema}"'))
    except (OSError, asyncpg.PostgresError) as exc:  # pragma: no cover - environment failure
        pytest.fail(f"PostgreSQL at {PG_URL} is unreachable: {exc}")
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}schema={schema}"
    asyncio.run(_pg_admin(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def app(db_url: str) -> AsyncIterator[skiplock.App]:
    the_app = skiplock.App(db_url)
    await the_app.migrate()
    yield the_app
    await the_app.close()


@pytest.fixture
async def clocked_app(db_url: str, clock: FakeClock) -> AsyncIterator[skiplock.App]:
    the_app = skiplock.App(db_url, clock=clock)
    await the_app.migrate()
    yield the_app
    await the_app.close()
