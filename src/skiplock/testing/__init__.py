"""Helpers for testing code that uses skiplock: throw-away databases, eager mode, fixtures.

Three ways to test, from the fastest to the most real::

    # 1. eager: the task runs at enqueue, in your loop, no database (arguments and result
    #    still go through the strict JSON a worker would insist on)
    with skiplock.testing.eager(app):
        handle = await resize.aenqueue("cat.png")
        assert await handle.result() == {"width": 64}

    # 2. a throw-away database, jobs run in process by a burst worker
    async with skiplock.testing.temporary_database(app):
        await resize.aenqueue("cat.png")
        (outcome,) = await app.drain()  # or skiplock.testing.drain(app)
        assert outcome.state is JobState.SUCCEEDED

    # 3. the pytest fixture (``pytest_plugins = ["skiplock.testing"]`` in conftest.py):
    #    ``skiplock_app`` is a fresh, migrated App on a throw-away database

The throw-away database is a SQLite file in a temporary directory, or, when
``SKIPLOCK_TEST_DATABASE_URL`` names a PostgreSQL server, a new schema on it, dropped after.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg

from .._app import App
from .._worker.drain import drain as drain  # the burst worker App.drain() runs

TEST_URL_VARIABLE = "SKIPLOCK_TEST_DATABASE_URL"


@contextlib.contextmanager
def eager(app: App) -> Iterator[App]:
    """Run ``app``'s tasks at enqueue while inside (see ``App(eager=True)``)."""
    before, app.eager = app.eager, True
    try:
        yield app
    finally:
        app.eager = before
        app.eager_outcomes.clear()


@contextlib.asynccontextmanager
async def temporary_database(app: App, url: str | None = None) -> AsyncIterator[App]:
    """Point ``app`` at a new, migrated database for the block, then drop it and restore
    the app's URL. ``url`` (default: ``SKIPLOCK_TEST_DATABASE_URL``, else SQLite) picks the
    server; a PostgreSQL URL gets a schema of its own."""
    base = url or os.environ.get(TEST_URL_VARIABLE)
    before = app.url
    await app.close()  # a backend open on the old URL would keep being used
    async with _throwaway_url(base) as throwaway:
        app.url = throwaway
        try:
            await app.migrate()
            yield app
        finally:
            await app.close()
            app.url = before


@contextlib.asynccontextmanager
async def _throwaway_url(base: str | None) -> AsyncIterator[str]:
    if base is None or base.startswith("sqlite"):
        with tempfile.TemporaryDirectory(prefix="skiplock-test-") as directory:
            yield f"sqlite:///{directory}/jobs.db"
        return
    schema = f"skiplock_test_{uuid.uuid4().hex[:12]}"
    yield f"{base}{'&' if '?' in base else '?'}schema={schema}"
    conn = await asyncpg.connect(base)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


with contextlib.suppress(ImportError):  # the fixtures need pytest-asyncio; the rest does not
    import pytest_asyncio

    @pytest_asyncio.fixture
    async def skiplock_app() -> AsyncIterator[App]:
        """A fresh App on a throw-away, migrated database (register tasks on it in the test)."""
        async with temporary_database(App("sqlite:///unused.db")) as app:
            yield app
