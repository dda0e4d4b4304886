"""Enqueue inside the caller's own transaction: it commits or rolls back with business rows.

Covered for every connection skiplock accepts: asyncpg, psycopg 3 (async and sync), sqlite3.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator

import asyncpg
import psycopg
import pytest

import skiplock
from skiplock import JobState, Worker

from .conftest import PG_URL


async def burst(app: skiplock.App) -> None:
    await asyncio.wait_for(Worker(app, poll_interval_s=0.05).run(burst=True), timeout=60)


@pytest.fixture
async def pg_app(pg_url: str) -> AsyncIterator[skiplock.App]:
    app = skiplock.App(pg_url)
    await app.migrate()
    yield app
    await app.close()


def register(app: skiplock.App, ran: list[int]) -> skiplock.Task[[int], object]:
    @app.task(name="receipt")
    async def receipt(order_id: int) -> None:
        ran.append(order_id)

    return receipt


def woken(app: skiplock.App) -> list[str]:
    """The in-process wake-ups the app sends: none may fire before the caller commits (a
    worker woken then finds nothing and sleeps; the commit's NOTIFY or data_version wakes it)."""
    wakes: list[str] = []
    app.add_waker(wakes.append)
    return wakes


def schema_of(app: skiplock.App) -> str:
    return app.url.rsplit("schema=", 1)[1]


async def test_asyncpg_commit_and_rollback(pg_app: skiplock.App) -> None:
    ran: list[int] = []
    receipt = register(pg_app, ran)
    wakes = woken(pg_app)
    conn = await asyncpg.connect(PG_URL)
    try:
        async with conn.transaction():
            handle = await receipt.using(connection=conn).aenqueue(1)
            # not visible to others before commit, and no worker woken to look for it
            with pytest.raises(skiplock.JobNotFound):
                await pg_app.get_job(handle.id)
            assert wakes == []
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await receipt.using(connection=conn).aenqueue(2)
                raise RuntimeError("business failure")
    finally:
        await conn.close()
    await burst(pg_app)
    assert ran == [1]
    assert (await pg_app.counts())["succeeded"] == 1


async def test_asyncpg_commit_wakes_a_listening_worker(pg_app: skiplock.App) -> None:
    done = asyncio.Event()

    @pg_app.task(name="wake")
    async def wake() -> None:
        done.set()

    wakes = woken(pg_app)
    worker = Worker(pg_app, poll_interval_s=60)  # only NOTIFY can make this prompt
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 30)  # listening, first claim made
    conn = await asyncpg.connect(PG_URL)
    try:
        async with conn.transaction():
            await wake.using(connection=conn).aenqueue()
            assert wakes == []  # an in-process wake-up now would find nothing
    finally:
        await conn.close()
    await asyncio.wait_for(done.wait(), 10)
    worker.request_stop()
    await asyncio.wait_for(run, 10)


async def test_psycopg_async_commit_and_rollback(pg_app: skiplock.App) -> None:
    ran: list[int] = []
    receipt = register(pg_app, ran)
    wakes = woken(pg_app)
    conn = await psycopg.AsyncConnection.connect(PG_URL)
    try:
        async with conn.transaction():
            await conn.execute(f'CREATE TABLE "{schema_of(pg_app)}".orders (id int)')
            await receipt.using(connection=conn).aenqueue(1)
            assert wakes == []
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await receipt.using(connection=conn).aenqueue(2)
                raise RuntimeError("business failure")
    finally:
        await conn.close()
    await burst(pg_app)
    assert ran == [1]


async def test_psycopg_sync_commit_and_rollback(pg_app: skiplock.App) -> None:
    ran: list[int] = []
    receipt = register(pg_app, ran)
    wakes = woken(pg_app)

    def business() -> list[int]:
        ids = []
        with psycopg.connect(PG_URL) as conn:
            with conn.transaction():
                ids.append(receipt.using(connection=conn).enqueue(1).id)
                assert wakes == []
            try:
                with conn.transaction():
                    ids.append(receipt.using(connection=conn).enqueue(2).id)
                    raise RuntimeError("business failure")
            except RuntimeError:
                pass
        return ids

    committed, rolled_back = await asyncio.to_thread(business)
    await burst(pg_app)
    assert ran == [1]
    assert (await pg_app.get_job(committed)).state is JobState.SUCCEEDED
    with pytest.raises(skiplock.JobNotFound):
        await pg_app.get_job(rolled_back)


async def test_sqlite3_commit_and_rollback(sqlite_url: str) -> None:
    app = skiplock.App(sqlite_url)
    await app.migrate()
    ran: list[int] = []
    receipt = register(app, ran)
    wakes = woken(app)
    path = sqlite_url.removeprefix("sqlite:///")
    try:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE orders (id INTEGER)")
        with conn:
            conn.execute("INSERT INTO orders VALUES (1)")
            receipt.using(connection=conn).enqueue(1)
            assert wakes == []
        try:
            with conn:
                conn.execute("INSERT INTO orders VALUES (2)")
                receipt.using(connection=conn).enqueue(2)
                raise RuntimeError("business failure")
        except RuntimeError:
            pass
        conn.close()
        await burst(app)
        assert ran == [1]
    finally:
        await app.close()


async def test_sqlite3_commit_wakes_a_listening_worker(sqlite_url: str) -> None:
    app = skiplock.App(sqlite_url)
    await app.migrate()
    done = asyncio.Event()

    @app.task(name="wake")
    async def wake() -> None:
        done.set()

    wakes = woken(app)
    worker = Worker(app, poll_interval_s=60)  # only the data_version watch can make this prompt
    run = asyncio.create_task(worker.run())
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    try:
        with conn:
            wake.using(connection=conn).enqueue()
            assert wakes == []
        await asyncio.wait_for(done.wait(), 10)
    finally:
        conn.close()
        worker.request_stop()
        await asyncio.wait_for(run, 10)
        await app.close()


async def test_a_wrong_kind_of_connection_is_a_clear_error(sqlite_url: str) -> None:
    app = skiplock.App(sqlite_url)
    await app.migrate()

    @app.task(name="x")
    async def x() -> None:
        pass

    try:
        with pytest.raises(TypeError, match=r"sqlite3\.Connection"):
            await x.using(connection=object()).aenqueue()
        assert (await app.counts())["pending"] == 0
    finally:
        await app.close()


def test_sync_enqueue_without_a_loop(sqlite_url: str) -> None:
    app = skiplock.App(sqlite_url)

    @app.task(name="plain")
    def plain(n: int) -> None:
        pass

    async def prepare() -> None:
        await app.migrate()
        await app.close()

    asyncio.run(prepare())
    handle = plain.enqueue(5)
    assert handle.id >= 1
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        plain.enqueue(object())  # type: ignore[arg-type]


async def test_a_replacing_enqueue_works_on_every_connection(pg_app: skiplock.App) -> None:
    """``on_conflict="replace"`` and ``debounce`` take more than the insert (the holder's
    update): on asyncpg, psycopg async and psycopg sync connections, in the caller's
    transaction, ending with one job holding the last arguments."""

    @pg_app.task(name="refresh", unique_key="refresh", on_conflict="replace")
    async def refresh(n: int) -> None: ...

    conn = await asyncpg.connect(PG_URL)
    try:
        async with conn.transaction():
            first = await refresh.using(connection=conn).aenqueue(1)
            assert (await refresh.using(connection=conn).aenqueue(2)).id == first.id
    finally:
        await conn.close()
    aconn = await psycopg.AsyncConnection.connect(PG_URL)
    try:
        async with aconn.transaction():
            assert (await refresh.using(connection=aconn).aenqueue(3)).id == first.id
    finally:
        await aconn.close()

    def sync() -> int:
        with psycopg.connect(PG_URL) as sconn, sconn.transaction():
            return refresh.using(connection=sconn, debounce=30).enqueue(4).id

    assert await asyncio.to_thread(sync) == first.id
    job = await pg_app.get_job(first.id)
    assert job.args == [4] and (job.run_at - job.created_at).total_seconds() >= 30
