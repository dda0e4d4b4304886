"""One App over several PostgreSQL databases: each migrated, each numbered, its ids its own.

The other database is a real one (``CREATE DATABASE`` on the test server, a fresh schema in
it per test: ``other_db``), not a schema of the first: a connection to one cannot read the
other's tables, as with two servers."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

import skiplock
from skiplock import Database, Worker
from skiplock._backends.params import ClaimParams, JobInsertManyParams, NewJob
from skiplock._backends.postgres.url import parse_postgres_url
from skiplock._lanes import ID_SPAN
from skiplock._worker.supervisor import Reported, release_by_url
from skiplock.errors import ConfigurationError

from .helpers import PG_URL, server_url


def job() -> NewJob:
    return NewJob("t", "default", "[]", "{}", 0, 3)


async def insert(app: skiplock.App, database: str) -> int:
    backend = await app.backend(database=database)
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([job()]))
    return job_id


async def test_migrate_numbers_every_database_and_its_ids_name_it(
    pg_url: str, other_db: str
) -> None:
    app = skiplock.App(pg_url, databases={"b": Database(other_db, number=3)})
    try:
        await app.migrate()
        own, other = await insert(app, "default"), await insert(app, "b")
        assert own < ID_SPAN and 3 * ID_SPAN < other < 4 * ID_SPAN
        assert app.directory.name_of_id(own) == "default"
        assert app.directory.name_of_id(other) == "b"
        assert await app.migrate() == []  # again: nothing to do, the number kept
        assert 3 * ID_SPAN < await insert(app, "b") < 4 * ID_SPAN
    finally:
        await app.close()
    conn = await asyncpg.connect(server_url(other_db))
    schema = parse_postgres_url(other_db).schema
    try:
        assert await conn.fetchval(f'SELECT number FROM "{schema}".skiplock_database') == 3
    finally:
        await conn.close()


async def test_a_database_keeps_its_number(pg_url: str, other_db: str) -> None:
    first = skiplock.App(pg_url, databases={"b": Database(other_db, number=3)})
    await first.migrate()
    await first.close()
    renumbered = skiplock.App(pg_url, databases={"b": Database(other_db, number=4)})
    try:
        says = r"database 'b' \(.*\) is number 3, and databases= says 4"
        with pytest.raises(ConfigurationError, match=says):
            await renumbered.backend(database="b")
        with pytest.raises(ConfigurationError, match="is number 3"):
            await renumbered.migrate()
    finally:
        await renumbered.close()


async def test_a_database_that_made_jobs_as_an_apps_own_cannot_join_as_another(
    pg_url: str, other_db: str
) -> None:
    """Its ids are counted from 1 already: as number 2 they would name the wrong database."""
    alone = skiplock.App(other_db)
    await alone.migrate()
    await insert(alone, "default")
    await alone.close()
    joined = skiplock.App(pg_url, databases={"b": Database(other_db, number=2)})
    try:
        with pytest.raises(ConfigurationError, match="is number 0, and databases= says 2"):
            await joined.migrate()
    finally:
        await joined.close()


def test_several_databases_are_postgresql_only(tmp_path: object) -> None:
    with pytest.raises(ConfigurationError, match="several databases are PostgreSQL's"):
        skiplock.App(
            f"sqlite:///{tmp_path}/x.db",
            databases={"b": Database("postgresql://127.0.0.1/b", number=1)},
        )
    with pytest.raises(ConfigurationError, match="not in this App's databases="):
        skiplock.App(PG_URL).url_of("nowhere")


async def test_sqlite_is_database_zero(sqlite_url: str) -> None:
    app = skiplock.App(sqlite_url)
    try:
        await app.migrate()
        backend = await app.backend()
        assert await backend.database_number(0) == 0
        with pytest.raises(ConfigurationError, match="SQLite serves one machine"):
            await backend.database_number(1)
    finally:
        await app.close()


async def test_a_worker_serves_the_database_it_is_given(pg_url: str, other_db: str) -> None:
    """``Worker(app, database="b")`` (``skiplock worker --database b``) claims b's jobs and
    none of the App's own; the default worker the reverse. Each schedule is one database's:
    only the worker of that database runs it, so a slot runs once across them."""
    app = skiplock.App(pg_url, databases={"b": Database(other_db, number=1)})
    ran: list[int] = []

    @app.task
    def note(x: int) -> None:
        ran.append(x)

    app.schedule(note, "* * * * *", name="tick", args=[0])
    try:
        await app.migrate()
        b = await app.backend(database="b")
        (in_b,) = await b.job_insert_many(JobInsertManyParams([note.prepare(1)]))
        assert app.directory.name_of_id(in_b) == "b"
        await note.aenqueue(2)  # the App's own database
        pinned = Worker(app, database="b")
        await pinned.run(burst=True)
        assert ran == [1] and pinned.processed == 1
        assert pinned.scheduler is None or pinned.scheduler.schedules == []
        own = Worker(app, database="default")
        await own.run(burst=True)
        assert ran == [1, 2]
        assert own.scheduler is not None
        assert own.scheduler.schedules == [app.schedules["tick"]]
    finally:
        await app.close()


def test_a_worker_names_a_known_database() -> None:
    with pytest.raises(ConfigurationError, match="database='no way': must be 1 to 63"):
        skiplock.WorkerConfig(database="no way")


async def test_one_worker_serves_every_database_by_default(pg_url: str, other_db: str) -> None:
    """``Worker(app)`` with several databases: a worker for each, side by side, the
    concurrency shared out, and the schedule run by the one of its database alone."""
    app = skiplock.App(pg_url, databases={"b": Database(other_db, number=1)})
    ran: list[int] = []

    @app.task
    def note(x: int) -> None:
        ran.append(x)

    app.schedule(note, "* * * * *", name="tick", args=[0])
    try:
        await app.migrate()
        b = await app.backend(database="b")
        await b.job_insert_many(JobInsertManyParams([note.prepare(i) for i in range(5)]))
        for i in range(5, 8):
            await note.aenqueue(i)
        both = Worker(app, concurrency=5)
        assert sorted(both.databases) == ["b", "default"]
        assert [both.databases[d].config.concurrency for d in ("default", "b")] == [3, 2]
        # one meter for the process, so one summary line an interval (the first one logs it)
        assert [both.databases[d].config.log_summary_interval_s for d in ("default", "b")] == [
            60.0,
            0.0,
        ]
        await both.run(burst=True)
        assert sorted(ran) == list(range(8)) and both.processed == 8
        default, other = both.databases["default"], both.databases["b"]
        assert default.scheduler is not None and default.scheduler.schedules
        assert other.scheduler is None or other.scheduler.schedules == []
        assert not both.ready.is_set()  # cleared once it stopped
    finally:
        await app.close()


async def test_a_gone_workers_leases_are_released_in_every_lane_it_claimed(
    pg_url: str, other_db: str
) -> None:
    """The supervisor releases a dead child's leases lane by lane, the lanes the child
    reported (each statement names one): a lease in lane 'eu' is released only when 'eu' is
    among them."""
    app = skiplock.App(pg_url, databases={"b": Database(other_db, number=1)}, lanes={"eu": "b"})

    @app.task(lane="eu")
    def note() -> None: ...

    try:
        await app.migrate()
        b = await app.backend(database="b")
        assert b.lanes == ("default", "eu")
        (job_id,) = await b.job_insert_many(JobInsertManyParams([note.prepare()]))
        claim = ClaimParams(None, 1, "w", "gone:1:1", 60.0, 5.0, lane="eu")
        assert [j.id for j in await b.job_get_available(claim)] == [job_id]
        released = await asyncio.to_thread(release_by_url, [Reported("gone:1", other_db)])
        assert released == []  # 'default' alone: its lease in 'eu' stays
        everywhere = Reported("gone:1", other_db, ("default", "eu"))
        assert await asyncio.to_thread(release_by_url, [everywhere]) == [job_id]
        assert (await b.job_get(job_id)).state == "pending"
    finally:
        await app.close()


async def test_the_connection_budget_is_divided_not_multiplied(pg_url: str, other_db: str) -> None:
    """Each database's main pool is the one-database budget divided between them."""
    alone = skiplock.App(pg_url)
    both = skiplock.App(pg_url, databases={"b": Database(other_db, number=1)})
    try:
        await both.migrate()
        pools = [(await both.backend(database=d)).pool for d in ("default", "b")]  # type: ignore[attr-defined]
        assert [p.get_max_size() for p in pools] == [5, 5]
        assert (await alone.backend()).pool.get_max_size() == 10  # type: ignore[attr-defined]
    finally:
        await both.close()
        await alone.close()
