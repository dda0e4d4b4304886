"""A person's reads never pin the hot path (issue 44): the dashboard, ``skiplock stats``, the
CLI's lists and a worker's gauges read in short transactions, hold the live segments only
while they read the live jobs, wait for a lock at most two seconds, and count what they
counted before.

Every session holding a lock on a live segment, ``ACCESS SHARE`` included, makes the rotation's
truncate give up (``postgres_storage.rotate_live``). Where a test here needs a reading to stop in
the middle of its history, a session of the test holds ``ACCESS EXCLUSIVE`` on a partition the
reading reads after the live ones (``skiplock_jobs_waiting``, the last in the table's partition
order; or a history partition): the wait stands in for a long read of the history, and the
test looks, while it lasts, at what the reading's sessions hold (each test's app has an
``application_name`` of its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

import skiplock
from skiplock import JobFilter, JobState
from skiplock._backends.postgres.storage.generations import GEN_FIRST
from skiplock.dashboard import create_app
from skiplock.errors import BackendError

from .backends.helpers import seed_every_state as seed
from .helpers import APP, PG_URL, ROOT, Cli, pg_admin

LIVE_LOCKS = r"""
SELECT a.pid, c.relname, l.mode FROM pg_locks l
JOIN pg_class c ON c.oid = l.relation
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE a.application_name = $1 AND n.nspname = $2 AND l.granted
  AND c.relname LIKE 'skiplock\_jobs\_live%'
ORDER BY 1, 2
"""
"""The locks the app's sessions hold on the live partition and its segments."""

WAITING_FOR = """
SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE a.application_name = $1 AND NOT l.granted AND l.relation = $2::regclass
"""
"""How many of the app's sessions wait for a lock on the relation $2."""

IN_TRANSACTION = """
SELECT pid, state, query FROM pg_stat_activity
WHERE application_name = $1 AND state LIKE 'idle in transaction%'
"""
"""The app's sessions left in a transaction between statements."""


class Reader:
    """A migrated PostgreSQL schema, an app on it named ``name`` in pg_stat_activity, and a
    session of the test's own to seed, lock and look with."""

    def __init__(self, app: skiplock.App, schema: str, name: str, conn: asyncpg.Connection):
        self.app, self.schema, self.name, self.conn = app, schema, name, conn
        self.ids: dict[str, list[int]] = {}
        """The seeded jobs' ids, by what they are (``seed``)."""

    def table(self, name: str) -> str:
        return f'"{self.schema}".{name}'

    async def live_locks(self) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in await self.conn.fetch(LIVE_LOCKS, self.name, self.schema)]

    async def left_in_transaction(self) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in await self.conn.fetch(IN_TRANSACTION, self.name)]

    @contextlib.asynccontextmanager
    async def held(self, table: str) -> AsyncIterator[Callable[[], Awaitable[int]]]:
        """``table`` under ACCESS EXCLUSIVE from another session of the test's (not this one's,
        which the test keeps to look with) until the block ends; yields how many of the app's
        sessions wait for it."""
        holder = await asyncpg.connect(PG_URL)
        try:
            async with holder.transaction():
                await holder.execute(f"LOCK TABLE {self.table(table)} IN ACCESS EXCLUSIVE MODE")

                async def waiting() -> int:
                    return int(await self.conn.fetchval(WAITING_FOR, self.name, self.table(table)))

                yield waiting
        finally:
            await holder.close()


def named(url: str, name: str) -> str:
    return f"{url}&application_name={name}"


@contextlib.asynccontextmanager
async def reading_app(pg_url: str, options: str = "") -> AsyncIterator[Reader]:
    """A seeded schema and an app on it with a name of its own (and the URL's ``options``)."""
    name = f"readers-{uuid.uuid4().hex[:10]}"
    app = skiplock.App(named(pg_url, name) + options)
    await app.migrate()
    conn = await asyncpg.connect(PG_URL)
    try:
        the_reader = Reader(app, pg_url.rsplit("schema=", 1)[1], name, conn)
        the_reader.ids = await seed(app)
        yield the_reader
    finally:
        await conn.close()
        await app.close()


@pytest.fixture
async def reader(pg_url: str) -> AsyncIterator[Reader]:
    async with reading_app(pg_url) as the_reader:
        yield the_reader


async def until(check: Callable[[], Awaitable[Any]], what: str, task: asyncio.Task[Any]) -> None:
    """Until ``check()`` is true (the event loop runs between looks); fails at once if
    ``task``, the reading looked at, ends first."""
    async with asyncio.timeout(30):
        while not await check():
            if task.done():
                raise AssertionError(f"the reading ended ({task.result()!r:.200}) before {what}")
            await asyncio.sleep(0.01)


Reading = Callable[[skiplock.App], contextlib.AbstractAsyncContextManager[Callable[[], Any]]]
"""What a test reads with: set up on an app (outside the test's lock), then called."""


def call(fn: Callable[[skiplock.App], Awaitable[Any]]) -> Reading:
    @contextlib.asynccontextmanager
    async def ready(app: skiplock.App) -> AsyncIterator[Callable[[], Awaitable[Any]]]:
        yield lambda: fn(app)

    return ready


@contextlib.asynccontextmanager
async def dashboard(app: skiplock.App) -> AsyncIterator[httpx.AsyncClient]:
    """The dashboard of ``app`` served in process to a client, its sampler's first sample
    taken (it then sleeps: nothing reads behind the test's back)."""
    web = create_app(app, sample_every_s=3600, auth=lambda request: "admin")
    await web.state.dashboard.sampler.start_detached()
    transport = httpx.ASGITransport(app=web)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://dash") as client:
            yield client
    finally:
        await web.state.dashboard.sampler.aclose()


@contextlib.asynccontextmanager
async def overview(app: skiplock.App) -> AsyncIterator[Callable[[], Awaitable[Any]]]:
    async with dashboard(app) as client:

        async def get() -> int:
            response = await client.get("/")
            assert response.status_code == 200, response.text[-500:]
            return response.status_code

        yield get


READINGS: dict[str, Reading] = {
    "stats": call(lambda app: app.stats()),
    "the Overview": overview,
    "counts": call(lambda app: app.counts()),
    "counts of one queue": call(lambda app: app.counts("q1")),
    "counts by queue": call(lambda app: app.counts_by_queue()),
    "the Jobs page's counts": call(lambda app: app.count_jobs_by_state(JobFilter())),
    "a list of every state": call(lambda app: app.list_jobs(None, JobFilter(error="boom"))),
    "a count of every state": call(lambda app: app.count_jobs(None, JobFilter(queue="q1"))),
    "a search": call(lambda app: app.find_jobs("order-1")),
}
"""Reads of the live jobs and the rest together, as the dashboard and the CLI make them."""


@pytest.mark.parametrize("reading", READINGS.values(), ids=READINGS)
async def test_a_reading_holds_no_live_segment_while_it_reads_the_rest(
    reader: Reader, reading: Reading
) -> None:
    """The reading waits, in the middle of what it reads after the live jobs (the jobs in
    waiting, locked by the test): it holds no lock on the live partition or a segment then, so
    a rotation could truncate. Before, the live statements came first in one transaction, or
    one statement read every partition, and the segments stayed locked to its end."""
    async with reading(reader.app) as read:
        async with reader.held("skiplock_jobs_waiting") as waiting:
            task = asyncio.create_task(read())
            await until(lambda: waiting(), "it waited for the jobs in waiting", task)
            assert await reader.live_locks() == []
        await task


ONE_STATE: dict[str, Callable[[skiplock.App], Awaitable[Any]]] = {
    "dead jobs": lambda app: app.list_jobs(JobState.DEAD),
    "how many dead": lambda app: app.count_jobs(JobState.DEAD, JobFilter()),
    "succeeded jobs": lambda app: app.list_jobs(JobState.SUCCEEDED, JobFilter(queue="q2")),
    "the Jobs page's counts of dead jobs": lambda app: app.count_jobs(
        JobState.DEAD, JobFilter(error="boom")
    ),
}


@pytest.mark.parametrize("read", ONE_STATE.values(), ids=ONE_STATE)
async def test_a_read_of_finished_jobs_never_waits_on_a_live_segment(
    pg_url: str, read: Callable[[skiplock.App], Awaitable[Any]]
) -> None:
    """A live generation under ACCESS EXCLUSIVE (a detach's finish holds it so) does not stop a
    read of dead or succeeded jobs, even on the generic plan a server may keep for a prepared
    statement (``plan_cache_mode`` here forces it): such a read names its state's partition.
    Before, ``state = $1`` on the whole table planned generic locked every partition, the
    segments too, and waited behind it."""
    async with reading_app(pg_url, "&plan_cache_mode=force_generic_plan") as reader:
        for _ in range(2):  # the second run on the statement prepared by the first
            async with reader.held(f"skiplock_jobs_live_s{GEN_FIRST}"):  # the newest
                rows = await asyncio.wait_for(read(reader.app), 10)
        assert rows


async def test_a_read_behind_a_held_lock_fails_in_two_seconds_saying_so(reader: Reader) -> None:
    """A session holding a job table (a migration, a person's LOCK TABLE) makes the dashboard's
    and the CLI's reads fail after READ_LOCK_TIMEOUT_MS, with a message naming the lock,
    rather than hang the page or the command for as long as it holds on."""
    from skiplock._backends.postgres.storage import reads as postgres_reads

    for read in (lambda: reader.app.stats(), lambda: reader.app.list_jobs(JobState.DEAD)):
        async with reader.held("skiplock_jobs_dead"):
            started = asyncio.get_running_loop().time()
            with pytest.raises(BackendError, match="lock") as caught:
                await asyncio.wait_for(read(), 20)
            waited = asyncio.get_running_loop().time() - started
        assert postgres_reads.READ_LOCK_TIMEOUT_MS / 1000 <= waited < 10, waited
        assert "another session holds a lock" in str(caught.value)


DIRECT_COUNTS = """
SELECT queue, CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END,
       count(*)
FROM skiplock_jobs GROUP BY 1, 2
"""
"""The counts the reads must give, read from the table directly (both databases)."""


async def direct(url: str, statement: str) -> list[tuple[Any, ...]]:
    """``statement``'s rows, read outside skiplock (a connection of the test's own)."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return [tuple(r) for r in conn.execute(statement)]
        finally:
            conn.close()
    schema = url.rsplit("schema=", 1)[1]
    pg = await asyncpg.connect(PG_URL, server_settings={"search_path": schema})
    try:
        return [tuple(r) for r in await pg.fetch(statement)]
    finally:
        await pg.close()


async def test_the_reads_count_what_the_table_holds(app: skiplock.App, db_url: str) -> None:
    """Read in two parts (PostgreSQL) or as before (SQLite), every count is the table's own:
    per queue and state, per state, in all, and the lists hold the table's rows in order."""
    await seed(app)
    rows = await direct(db_url, DIRECT_COUNTS)
    by_queue: dict[str, dict[str, int]] = {}
    for queue, state, n in rows:
        by_queue.setdefault(queue, {})[state] = n
    states = {s.value for s in JobState} | {"claimed"}
    expected = {q: {s: counts.get(s, 0) for s in states} for q, counts in by_queue.items()}
    assert await app.counts_by_queue() == expected
    for queue, counts in expected.items():
        assert await app.counts(queue) == counts
    total = {s: sum(c[s] for c in expected.values()) for s in states}
    assert await app.counts() == total
    raw = {**total, "running": total["running"] + total["claimed"]}
    del raw["claimed"]
    assert await app.count_jobs_by_state(JobFilter()) == {s: n for s, n in raw.items() if n}
    assert await app.count_jobs(None, JobFilter()) == sum(raw.values())
    ids = [r[0] for r in await direct(db_url, "SELECT id FROM skiplock_jobs ORDER BY id DESC")]
    assert [j.id for j in await app.list_jobs(None, JobFilter(limit=500))] == ids
    assert [j.id for j in await app.list_jobs(None, JobFilter(limit=4))] == ids[:4]
    page = await app.list_jobs(None, JobFilter(limit=3), before_id=ids[2])
    assert [j.id for j in page] == ids[3:6]
    oldest = await app.list_jobs(None, JobFilter(limit=5), oldest_first=True)
    assert [j.id for j in oldest] == sorted(ids)[:5]
    found = await app.find_jobs("order-2")
    assert [j.correlation_id for j in found] == ["order-2"]
    stats = await app.stats()
    assert (stats.total.pending, stats.total.claimed) == (total["pending"], total["claimed"])
    assert (stats.total.running, stats.total.waiting) == (total["running"], total["waiting"])
    assert (stats.total.completed, stats.total.dead) == (total["succeeded"], total["dead"])
    assert stats.total.cancelled == total["cancelled"]
    assert {g.name for g in stats.queues} == set(expected)


def pages(ids: dict[str, list[int]]) -> list[str]:
    """Every page of the dashboard a GET reaches, with jobs of every kind to show."""
    one, dead, chain = ids["q1"][0], ids["dead"][0], ids["chain"]
    return [
        "/",
        "/jobs",
        "/jobs?state=dead",
        "/jobs?state=succeeded&queue=q2",
        "/jobs?state=pending",
        "/jobs?error=boom",
        "/jobs?find=order-1",
        f"/jobs?before={ids['q2'][-1]}",
        f"/jobs/{one}",
        f"/jobs/{dead}",
        f"/jobs/{chain[-1]}",
        f"/jobs/{chain[-1]}/parents",
        f"/jobs/{chain[0]}/children",
        "/waiting",
        "/dead",
        "/dead/confirm?action=requeue&task=a",
        f"/selected?action=retry&ids={dead}&ids={one}",
        "/schedules",
        "/workers",
    ]


async def test_no_dashboard_page_leaves_a_transaction_open_on_postgresql(pg_url: str) -> None:
    """After each page's response no session of the dashboard is idle in a transaction, and
    none holds a lock on the live partition or a segment: every page reads in statements or
    short transactions it ends before it renders. (A page that left one open, a read on a
    connection taken from the pool and kept, is what this catches.)"""
    async with reading_app(pg_url) as reader, dashboard(reader.app) as client:
        for page in pages(reader.ids):
            response = await client.get(page)
            assert response.status_code == 200, (page, response.text[-300:])
            assert await reader.left_in_transaction() == [], page
            assert await reader.live_locks() == [], page


async def test_no_dashboard_page_leaves_a_read_open_on_sqlite(sqlite_url: str) -> None:
    """SQLite: after each page no read transaction is left open on the dashboard's connection,
    so a checkpoint of the whole WAL goes through (a reader holding a snapshot would keep it:
    SQLite's checkpoint stops at the oldest reader's mark, and the WAL grows behind it)."""
    app = skiplock.App(sqlite_url)
    await app.migrate()
    path = sqlite_url.removeprefix("sqlite:///")
    try:
        ids = await seed(app)
        backend: Any = await app.backend()
        async with dashboard(app) as client:
            for page in pages(ids):
                response = await client.get(page)
                assert response.status_code == 200, (page, response.text[-300:])
                assert not backend._conn.in_transaction, page
                other = sqlite3.connect(path, isolation_level=None)
                try:
                    busy, _log, _done = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                finally:
                    other.close()
                assert busy == 0, page
    finally:
        await app.close()


@pytest.mark.slow
def test_stats_watch_holds_nothing_between_its_readings(pg_url: str, tmp_path: Path) -> None:
    """``skiplock stats --watch`` (a terminal left open on a server for days) keeps nothing
    open between two readings: each opens its sessions, reads, and closes them, so no session
    of it is left idle in a transaction or holding a lock while it waits for the next."""
    name = f"watch-{uuid.uuid4().hex[:10]}"
    url = named(pg_url, name)
    asyncio.run(migrate(url))
    env = {**Cli(url, tmp_path).env()}
    with subprocess.Popen(
        [sys.executable, "-m", "skiplock", "stats", APP, "--json", "--watch", "3600"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()  # the first reading, printed
            assert b'"total"' in first, (first, proc.stderr.read() if proc.poll() else b"")
            schema = pg_url.rsplit("schema=", 1)[1]
            sessions, locks = asyncio.run(held_by(name, schema))
            assert (sessions, locks) == ([], [])
        finally:
            proc.kill()


async def migrate(url: str) -> None:
    app = skiplock.App(url)
    try:
        await app.migrate()
    finally:
        await app.close()


async def held_by(name: str, schema: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The states of ``name``'s sessions, and their locks on any relation of ``schema``."""
    conn = await asyncpg.connect(PG_URL)
    try:
        states = [
            r[0]
            for r in await conn.fetch(
                "SELECT state FROM pg_stat_activity WHERE application_name = $1", name
            )
        ]
        locks = await conn.fetch(
            """SELECT c.relname, l.mode FROM pg_locks l
               JOIN pg_class c ON c.oid = l.relation
               JOIN pg_namespace n ON n.oid = c.relnamespace
               JOIN pg_stat_activity a ON a.pid = l.pid
               WHERE a.application_name = $1 AND n.nspname = $2""",
            name,
            schema,
        )
        return states, [tuple(r) for r in locks]
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def dumped_database() -> Iterator[str]:
    """A database of its own holding skiplock twice, in ``public`` (a queue sharing the app's
    schema) and in ``skiplock`` (a schema of its own), and 2 MB of an app's table: a dump of it
    fills a pipe long before it ends."""
    name = f"dump_{uuid.uuid4().hex[:12]}"
    asyncio.run(pg_admin(f'CREATE DATABASE "{name}"'))
    url = f"{PG_URL.split('?')[0].rsplit('/', 1)[0]}/{name}"

    async def prepare() -> None:
        for schema in ("public", "skiplock"):
            await migrate(f"{url}?schema={schema}")
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(
                "CREATE TABLE orders AS SELECT i, repeat('x', 1000) AS note"
                " FROM generate_series(1, 2000) i"
            )
        finally:
            await conn.close()

    try:
        asyncio.run(prepare())
        yield url
    finally:
        asyncio.run(pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


DUMPS = {
    "the whole database": ((), "public", True),
    "the live segments' data left out": (
        ("--exclude-table-data=skiplock_jobs_live*",),
        "public",
        True,
    ),
    "the live segments left out": (("--exclude-table=skiplock_jobs_live*",), "public", True),
    "the job table and its live segments left out": (
        ("--exclude-table=skiplock_jobs", "--exclude-table=skiplock_jobs_live*"),
        "public",
        False,
    ),
    "skiplock's schema left out": (("--exclude-schema=skiplock",), "skiplock", False),
}
"""pg_dump's options, the schema whose live tables are looked at, and whether the dump holds
locks on them (docs/operations/readers.md's table, measured with PostgreSQL 15's pg_dump)."""


@pytest.mark.slow
@pytest.mark.parametrize(("options", "schema", "locks"), DUMPS.values(), ids=DUMPS)
def test_what_pg_dump_holds_on_the_live_segments(
    dumped_database: str, tmp_path: Path, options: tuple[str, ...], schema: str, locks: bool
) -> None:
    """A real ``pg_dump`` held in the middle of its dump (its output unread, a pipe full): the
    locks it holds on ``skiplock_jobs_live`` and its segments, for as long as it runs. Only a
    dump that leaves the job table out holds none: excluding the segments' data, or the
    segments, still locks them (their definitions; the parent's ``LOCK TABLE`` takes every
    partition)."""
    fifo = tmp_path / "dump"
    os.mkfifo(fifo)
    name = f"dump-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PGAPPNAME": name}
    command = ["pg_dump", *options, f"--file={fifo}", dumped_database]
    with subprocess.Popen(command, env=env, stderr=subprocess.PIPE) as dump:
        with fifo.open("rb") as output:
            assert output.read(1)  # it writes once it has every lock it takes
            tables, live = asyncio.run(dump_locks(dumped_database, name, schema))
            assert dump.poll() is None  # still dumping: the pipe is full
            while output.read(1 << 16):
                pass
        assert dump.wait(60) == 0, dump.stderr.read() if dump.stderr else b""
    if locks:
        assert tables <= {table for table, mode in live if mode == "AccessShareLock"}, live
    else:
        assert live == [], live


async def dump_locks(url: str, name: str, schema: str) -> tuple[set[str], list[tuple[str, str]]]:
    """``schema``'s live partition and the segments under it, and the locks the session named
    ``name`` holds on them."""
    conn = await asyncpg.connect(url)
    try:
        segments = await conn.fetch(
            "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = $1::regclass",
            f'"{schema}".skiplock_jobs_live',
        )
        tables = {"skiplock_jobs_live", *(r[0].rsplit(".", 1)[-1] for r in segments)}
        rows = await conn.fetch(
            r"""SELECT c.relname, l.mode FROM pg_locks l
                JOIN pg_class c ON c.oid = l.relation
                JOIN pg_namespace n ON n.oid = c.relnamespace
                JOIN pg_stat_activity a ON a.pid = l.pid
                WHERE a.application_name = $1 AND n.nspname = $2 AND c.relkind IN ('r', 'p')
                  AND c.relname LIKE 'skiplock\_jobs\_live%'""",
            name,
            schema,
        )
        return tables, [(r["relname"], r["mode"]) for r in rows]
    finally:
        await conn.close()
