"""A job id is never handed out twice (issue 42): an id given out inside a transaction that
rolled back must not be given to a later job, in this process, another one, or after a
restart; the stale id then finds nothing. On SQLite the AUTOINCREMENT counter is a row the
rollback takes back (sqlite_ids.py keeps the ids beside the file); PostgreSQL's sequence is
not transactional. Written as an application writes it: enqueue inside its own transaction,
roll back, enqueue again."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

import skiplock
from skiplock import JobNotFound

from .helpers import PG_URL, ROOT


def register(app: skiplock.App) -> skiplock.Task[[int], int]:
    @app.task(name="receipt")
    async def receipt(order: int) -> int:
        return order

    return receipt


class Caller:
    """The application's own connection to the app's database, and its transactions."""

    def __init__(self, app: skiplock.App) -> None:
        self.app = app
        self.conn: Any = None

    async def __aenter__(self) -> Caller:
        if self.app.url.startswith("sqlite"):
            self.conn = sqlite3.connect(self.app.url.removeprefix("sqlite:///"))
        else:
            self.conn = await asyncpg.connect(PG_URL)
        return self

    async def __aexit__(self, *exc: object) -> None:
        closed = self.conn.close()
        if closed is not None:
            await closed

    async def rolled_back(self, task: skiplock.Task[[int], int], *orders: int) -> list[int]:
        """Enqueue ``orders`` inside a transaction of the caller's that then rolls back; the
        ids the enqueues handed out (logged, sent to a client...)."""
        if isinstance(self.conn, sqlite3.Connection):
            ids = [task.using(connection=self.conn).enqueue(n).id for n in orders]
            self.conn.rollback()
            return ids
        tx = self.conn.transaction()
        await tx.start()
        ids = [(await task.using(connection=self.conn).aenqueue(n)).id for n in orders]
        await tx.rollback()
        return ids


@pytest.fixture
async def receipt(app: skiplock.App) -> AsyncIterator[skiplock.Task[[int], int]]:
    yield register(app)


def python(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run by another Python process on this checkout's code."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=60,
    )


async def assert_stale(app: skiplock.App, stale: list[int]) -> None:
    for job_id in stale:
        with pytest.raises(JobNotFound):
            await app.get_job(job_id)


async def test_an_id_handed_out_in_a_rolled_back_transaction_is_not_handed_out_again(
    app: skiplock.App, receipt: skiplock.Task[[int], int]
) -> None:
    async with Caller(app) as caller:
        stale = await caller.rolled_back(receipt, 1)
        stale += await caller.rolled_back(receipt, 2, 3)  # the second rollback in a row
    after = await receipt.aenqueue(4)
    batch = await app.enqueue_many([receipt.prepare(n) for n in (5, 6)])
    keyed = await receipt.using(unique_key="order:7").aenqueue(7)
    fresh = [after.id, *(h.id for h in batch), keyed.id]
    assert not set(fresh) & set(stale), (stale, fresh)
    assert min(fresh) > max(stale)  # still in enqueue order
    await assert_stale(app, stale)
    await app.drain()
    assert (await app.get_job(after.id)).result == 4


async def test_an_enqueue_in_another_process_after_the_rollback_gets_a_new_id(
    app: skiplock.App, receipt: skiplock.Task[[int], int]
) -> None:
    """The rollback in this process; the next enqueue in a process started afterwards (a
    restart, another web worker) must not take the id either."""
    async with Caller(app) as caller:
        stale = await caller.rolled_back(receipt, 1)
    script = (
        "import asyncio, skiplock\n"
        "from tests.test_ids_never_reused import register\n"
        f"app = skiplock.App({app.url!r})\n"
        "receipt = register(app)\n"
        "print(receipt.enqueue(2).id)\n"
    )
    done = await asyncio.to_thread(python, script)
    assert done.returncode == 0, done.stderr
    other = int(done.stdout.strip())
    assert other not in stale and other > max(stale)
    await assert_stale(app, stale)


async def test_a_rollback_in_another_process_is_not_reused_here_after_a_restart(
    db_url: str,
) -> None:
    """Another process enqueues in its transaction, prints the id and rolls back; this
    process, started after it (a new App: nothing in memory), enqueues."""
    script = (
        "import asyncio, skiplock\n"
        "from tests.test_ids_never_reused import Caller, register\n"
        f"app = skiplock.App({db_url!r})\n"
        "receipt = register(app)\n"
        "async def main():\n"
        "    await app.migrate()\n"
        "    async with Caller(app) as caller:\n"
        "        print(*(await caller.rolled_back(receipt, 1, 2)))\n"
        "    await app.close()\n"
        "asyncio.run(main())\n"
    )
    done = await asyncio.to_thread(python, script)
    assert done.returncode == 0, done.stderr
    stale = [int(i) for i in done.stdout.split()]
    app = skiplock.App(db_url)
    try:
        receipt = register(app)
        fresh = [(await receipt.aenqueue(n)).id for n in (3, 4)]
        assert not set(fresh) & set(stale) and min(fresh) > max(stale), (stale, fresh)
        await assert_stale(app, stale)
    finally:
        await app.close()


async def test_ids_of_pruned_jobs_are_not_handed_out_again(
    app: skiplock.App, receipt: skiplock.Task[[int], int]
) -> None:
    """Every job done and pruned, the tables empty: the next id still follows the last."""
    done = [(await receipt.aenqueue(n)).id for n in range(3)]
    await app.drain()
    assert await app.prune(finished_age_s=0, dead_age_s=0) == 3
    await assert_stale(app, done)
    assert (await receipt.aenqueue(9)).id > max(done)
