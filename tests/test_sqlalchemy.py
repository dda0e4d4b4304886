"""Transactional enqueue through SQLAlchemy sessions and connections, on both databases.

Every driver SQLAlchemy offers for them: asyncpg, psycopg (async and sync), aiosqlite and
sqlite3. A job enqueued in a session commits with it, rolls back with it (a savepoint's
rollback included), works in a session that never flushed, and wakes a worker after commit.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session

import skiplock
from skiplock import Worker

from .conftest import PG_URL

ASYNC_DRIVERS = ["postgresql+asyncpg", "postgresql+psycopg", "sqlite+aiosqlite"]
SYNC_DRIVERS = ["postgresql+psycopg", "sqlite+pysqlite"]


def engine_url(driver: str, app_url: str) -> str:
    if driver.startswith("sqlite"):
        return app_url.replace("sqlite:", f"{driver}:", 1)
    return PG_URL.split("?", 1)[0].replace("postgresql:", f"{driver}:", 1)


def app_fixture_for(driver: str) -> str:
    return "sqlite_url" if driver.startswith("sqlite") else "pg_url"


@pytest.fixture
def app_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(app_fixture_for(request.param)))


@pytest.fixture
async def app(app_url: str) -> AsyncIterator[skiplock.App]:
    the_app = skiplock.App(app_url)
    await the_app.migrate()
    yield the_app
    await the_app.close()


def orders_table(app: skiplock.App) -> str:
    schema = app.url.rsplit("schema=", 1)[1] if "schema=" in app.url else None
    return f'"{schema}".orders' if schema else "orders"


@pytest.fixture
async def engine(app: skiplock.App, request: pytest.FixtureRequest) -> AsyncIterator[AsyncEngine]:
    the_engine = create_async_engine(engine_url(request.param, app.url))
    async with the_engine.begin() as conn:
        await conn.execute(sa.text(f"CREATE TABLE {orders_table(app)} (id int)"))
    yield the_engine
    await the_engine.dispose()


@pytest.fixture
def sync_engine(app: skiplock.App, request: pytest.FixtureRequest) -> Iterator[sa.Engine]:
    the_engine = sa.create_engine(engine_url(request.param, app.url))
    with the_engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {orders_table(app)} (id int)"))
    yield the_engine
    the_engine.dispose()


def receipt_task(app: skiplock.App, ran: list[int]) -> skiplock.Task[[int], object]:
    @app.task(name="receipt")
    async def receipt(order_id: int) -> None:
        ran.append(order_id)

    return receipt


async def exists(app: skiplock.App, job_id: int) -> bool:
    try:
        await app.get_job(job_id)
    except skiplock.JobNotFound:
        return False
    return True


async def pending(app: skiplock.App) -> int:
    return (await app.counts())["pending"]


async def drained(app: skiplock.App, ran: list[int]) -> list[int]:
    await asyncio.wait_for(Worker(app, poll_interval_s=0.05).run(burst=True), 60)
    return sorted(ran)


both = pytest.mark.parametrize(
    ("app_url", "engine"), [(d, d) for d in ASYNC_DRIVERS], indirect=True
)
both_sync = pytest.mark.parametrize(
    ("app_url", "sync_engine"), [(d, d) for d in SYNC_DRIVERS], indirect=True
)


@both
async def test_async_session_commit_rollback_and_savepoint(
    app: skiplock.App, engine: AsyncEngine
) -> None:
    ran: list[int] = []
    receipt = receipt_task(app, ran)
    orders = orders_table(app)
    async with AsyncSession(engine) as session:
        await session.execute(sa.text(f"INSERT INTO {orders} VALUES (1)"))
        handle = await receipt.using(connection=session).aenqueue(1)
        assert not await exists(app, handle.id)  # not before the session commits
        try:
            async with session.begin_nested():
                await receipt.using(connection=session).aenqueue(2)
                raise RuntimeError("rolls back the savepoint only")
        except RuntimeError:
            pass
        await session.commit()
        await receipt.using(connection=session).aenqueue(3)
        await session.rollback()
    assert await exists(app, handle.id)
    assert await drained(app, ran) == [1]


@both
async def test_async_session_never_flushed(app: skiplock.App, engine: AsyncEngine) -> None:
    ran: list[int] = []
    receipt = receipt_task(app, ran)
    async with AsyncSession(engine) as session:
        await receipt.using(connection=session).aenqueue(1)
        await session.rollback()
    assert await pending(app) == 0  # (SQLite may hand a rolled-back id out again)
    async with AsyncSession(engine) as session:
        committed = await receipt.using(connection=session).aenqueue(2)
        assert not await exists(app, committed.id)
        await session.commit()
    assert await drained(app, ran) == [2]


@both
async def test_async_connection_and_enqueue_many(app: skiplock.App, engine: AsyncEngine) -> None:
    ran: list[int] = []
    receipt = receipt_task(app, ran)
    async with engine.connect() as conn:
        handles = await app.enqueue_many((receipt.prepare(n) for n in range(300)), connection=conn)
        assert not await exists(app, handles[0].id)
        await conn.commit()
        await app.enqueue_many([receipt.prepare(999)], connection=conn)
        await conn.rollback()
    assert await drained(app, ran) == list(range(300))


@both
async def test_commit_wakes_a_listening_worker(app: skiplock.App, engine: AsyncEngine) -> None:
    done = asyncio.Event()

    @app.task(name="wake")
    async def wake() -> None:
        done.set()

    worker = Worker(app, poll_interval_s=60)  # only the commit's NOTIFY / data_version
    run = asyncio.create_task(worker.run())
    await worker.ready.wait()
    try:
        async with AsyncSession(engine) as session:
            await wake.using(connection=session).aenqueue()
            await session.commit()
        await asyncio.wait_for(done.wait(), 10)
    finally:
        worker.request_stop()
        await asyncio.wait_for(run, 10)


@both_sync
async def test_sync_session_commit_rollback_savepoint_and_never_flushed(
    app: skiplock.App, sync_engine: sa.Engine
) -> None:
    ran: list[int] = []
    receipt = receipt_task(app, ran)
    orders = orders_table(app)

    def business() -> int:
        with Session(sync_engine) as session:
            receipt.using(connection=session).enqueue(1)  # never flushed, then rolled back
            session.rollback()
            session.execute(sa.text(f"INSERT INTO {orders} VALUES (2)"))
            committed = receipt.using(connection=session).enqueue(2).id
            try:
                with session.begin_nested():
                    receipt.using(connection=session).enqueue(3)
                    raise RuntimeError("rolls back the savepoint only")
            except RuntimeError:
                pass
            session.commit()
        with sync_engine.connect() as conn:
            app.enqueue_many_sync([receipt.prepare(4), receipt.prepare(5)], connection=conn)
            conn.commit()
        return committed

    assert await exists(app, await asyncio.to_thread(business))
    assert await drained(app, ran) == [2, 4, 5]


@both
async def test_a_workflow_in_an_async_session_commits_and_rolls_back_with_it(
    app: skiplock.App, engine: AsyncEngine
) -> None:
    """A chain (its second link waiting) written on the session's driver connection, all
    of it with the session's transaction."""
    ran: list[int] = []
    receipt = receipt_task(app, ran)
    async with AsyncSession(engine) as session:
        kept = (
            await skiplock.chain(receipt.si(1), receipt.si(2)).using(connection=session).aenqueue()
        )
        assert not await exists(app, kept.ids[0])  # not before the session commits
        await session.commit()
        gone = (
            await skiplock.chain(receipt.si(3), receipt.si(4)).using(connection=session).aenqueue()
        )
        await session.rollback()
    assert (await app.get_job(kept.ids[1])).state is skiplock.JobState.WAITING
    assert not await exists(app, gone.ids[0]) and not await exists(app, gone.ids[1])
    assert await app.count_jobs() == 2
    assert await drained(app, ran) == [1, 2]


@both_sync
async def test_a_workflow_in_a_sync_session_commits_and_rolls_back_with_it(
    app: skiplock.App, sync_engine: sa.Engine
) -> None:
    """The same through a sync Session: sqlite3's connection, and psycopg's (a Django
    project's kind) on PostgreSQL."""
    ran: list[int] = []
    receipt = receipt_task(app, ran)

    def business() -> tuple[list[int], list[int]]:
        with Session(sync_engine) as session:
            gone = skiplock.chain(receipt.si(3), receipt.si(4)).using(connection=session).enqueue()
            session.rollback()
            kept = skiplock.chain(receipt.si(1), receipt.si(2)).using(connection=session).enqueue()
            session.commit()
        return kept.ids, gone.ids

    kept, _gone = await asyncio.to_thread(business)  # SQLite may give kept gone's ids again
    assert (await app.get_job(kept[1])).state is skiplock.JobState.WAITING
    assert await app.count_jobs() == 2
    assert await drained(app, ran) == [1, 2]


@pytest.mark.parametrize(("app_url", "engine"), [("sqlite+aiosqlite",) * 2], indirect=True)
async def test_an_async_session_in_sync_enqueue_is_a_clear_error(
    app: skiplock.App, engine: AsyncEngine
) -> None:
    receipt = receipt_task(app, [])
    async with AsyncSession(engine) as session:
        with pytest.raises(TypeError, match="aenqueue"):
            await asyncio.to_thread(receipt.using(connection=session).enqueue, 1)


def test_skiplock_does_not_import_sqlalchemy(tmp_path: Path) -> None:
    """The extra stays optional: enqueueing on a plain connection never imports it."""
    code = (
        "import asyncio, sqlite3, sys, skiplock\n"
        "app = skiplock.App('sqlite:///' + sys.argv[1])\n"
        "asyncio.run(app.migrate())\n"
        "task = app.task(name='t')(lambda: None)\n"
        "with sqlite3.connect(sys.argv[1]) as conn:\n"
        "    task.using(connection=conn).enqueue()\n"
        "assert not [m for m in sys.modules if m.startswith('sqlalchemy')], 'imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.db")], capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
