"""A database that stops stops only its own jobs: one worker over two PostgreSQL servers, one
of them stopped mid-drain and started again (issue 46). Nothing lost, nothing run twice."""

from __future__ import annotations

import asyncio
import collections
import uuid

import asyncpg
import pytest

import skiplock
from skiplock import Database, Worker
from skiplock._backends.params import JobInsertManyParams

from .clusters import DebianCluster, admin

pytestmark = pytest.mark.slow

JOBS = 20


async def test_a_database_stopped_mid_drain_stops_only_its_own_jobs(
    pg_url: str, pg15_cluster: DebianCluster
) -> None:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    await asyncio.to_thread(admin, pg15_cluster.url, f'CREATE SCHEMA "{schema}"')
    other = f"{pg15_cluster.url}?schema={schema}"
    app = skiplock.App(pg_url, databases={"b": Database(other, number=2)})
    ran: collections.Counter[tuple[str, int]] = collections.Counter()
    b_started, gate = asyncio.Event(), asyncio.Event()
    all_done = {"default": asyncio.Event(), "b": asyncio.Event()}

    @app.task
    async def note(where: str, i: int) -> None:
        if where == "b":
            b_started.set()
            await gate.wait()  # b's first jobs are running when its server stops
        ran[(where, i)] += 1
        if sum(1 for w, _ in ran if w == where) == JOBS:
            all_done[where].set()

    worker = Worker(app, concurrency=4, shutdown_timeout_s=5)
    running: asyncio.Task[None] | None = None
    try:
        await app.migrate()
        b = await app.backend(database="b")
        await b.job_insert_many(JobInsertManyParams([note.prepare("b", i) for i in range(JOBS)]))
        running = asyncio.create_task(worker.run())
        async with asyncio.timeout(30):
            await b_started.wait()
        await asyncio.to_thread(pg15_cluster.stop)  # b's jobs: 2 running, the rest pending
        for i in range(JOBS):
            await note.aenqueue("default", i)
        async with asyncio.timeout(60):  # the App's own database drains meanwhile
            await all_done["default"].wait()
        assert not any(where == "b" for where, _ in ran)
        await asyncio.to_thread(pg15_cluster.start)
        gate.set()
        async with asyncio.timeout(90):  # b's jobs finish once it is back
            await all_done["b"].wait()
    finally:
        gate.set()
        worker.request_stop()
        if running is not None:
            await running
        await app.close()
    assert set(ran.values()) == {1} and len(ran) == 2 * JOBS  # each ran once
    for url in (pg_url, other):
        conn = await asyncpg.connect(url.split("?")[0])
        try:
            where = url.split("schema=")[1]
            states = await conn.fetch(
                f'SELECT state, count(*) FROM "{where}".skiplock_jobs GROUP BY state'
            )
        finally:
            await conn.close()
        assert {r["state"]: r["count"] for r in states} == {"succeeded": JOBS}, (url, states)
    await asyncio.to_thread(admin, pg15_cluster.url, f'DROP SCHEMA "{schema}" CASCADE')
