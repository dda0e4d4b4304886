"""Enqueue goes to its lane's database (issue 46): routes, a task's own lane, a split queue,
a batch over several databases, the caller's transaction on the right and the wrong
database, and a workflow that would span lanes. Two real databases on the test server."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

import skiplock
from skiplock import Database, Split, Worker
from skiplock._backends.postgres.url import parse_postgres_url
from skiplock._lanes import ID_SPAN
from skiplock.errors import ConfigurationError

from .helpers import server_url


def routed(pg_url: str, other_db: str) -> skiplock.App:
    return skiplock.App(
        pg_url,
        databases={"b": Database(other_db, number=1)},
        lanes={"eu": "b", "hot-0": "default", "hot-1": "b"},
        routes={"email": "eu", "hot": Split("hot-0", "hot-1")},
    )


def in_b(job_id: int) -> bool:
    return ID_SPAN <= job_id < 2 * ID_SPAN


async def rows(url: str) -> list[int]:
    conn = await asyncpg.connect(url.split("?")[0])
    try:
        schema = url.split("schema=")[1] if "schema=" in url else "public"
        got = await conn.fetch(f'SELECT id FROM "{schema}".skiplock_jobs ORDER BY id')
        return [r["id"] for r in got]
    finally:
        await conn.close()


async def test_each_job_goes_to_its_lanes_database(pg_url: str, other_db: str) -> None:
    app = routed(pg_url, other_db)

    @app.task(queue="email")
    def send(to: str) -> None: ...

    @app.task
    def plain(n: int) -> None: ...

    @app.task(queue="hot", concurrency_key=lambda tenant: tenant)
    def hot(tenant: str) -> None: ...

    try:
        await app.migrate()
        mail = await send.aenqueue("a@example.com")
        assert in_b(mail.id) and app.directory.name_of_id(mail.id) == "b"
        own = await plain.aenqueue(1)
        assert own.id < ID_SPAN
        eu = await plain.using(lane="eu").aenqueue(2)  # the task's lane over the route
        assert in_b(eu.id)
        # a split queue: one tenant's jobs stay in one lane (one database), the tenants spread
        where = {t: {in_b((await hot.aenqueue(t)).id) for _ in range(3)} for t in "abcdefgh"}
        assert all(len(places) == 1 for places in where.values()), where
        assert {next(iter(p)) for p in where.values()} == {True, False}
        # a batch over both databases: each part in its own, the handles in the given order
        handles = await app.enqueue_many([send.prepare("x"), plain.prepare(3), send.prepare("y")])
        assert [in_b(h.id) for h in handles] == [True, False, True]
        assert sum(1 for i in await rows(other_db) if in_b(i)) == len(await rows(other_db))
        assert all(i < ID_SPAN for i in await rows(pg_url))
        # the sync enqueue routes alike
        assert in_b((await asyncio.to_thread(send.enqueue, "z")).id)
        # and a worker over both runs them all
        worker = Worker(app, concurrency=4)
        await worker.run(burst=True)
        assert worker.processed == len(await rows(other_db)) + len(await rows(pg_url))
    finally:
        await app.close()


async def test_a_lane_no_database_holds_is_refused(pg_url: str, other_db: str) -> None:
    app = routed(pg_url, other_db)
    with pytest.raises(ConfigurationError, match="lane 'asia' is not in lanes="):

        @app.task(lane="asia")
        def nowhere() -> None: ...

    @app.task
    def plain() -> None: ...

    with pytest.raises(ConfigurationError, match="lane 'asia' is not in lanes="):
        plain.using(lane="asia").prepare()
    with pytest.raises(ConfigurationError, match="lane='bad lane'"):
        plain.using(lane="bad lane")


async def test_the_callers_transaction_must_be_on_the_jobs_database(
    pg_url: str, other_db: str
) -> None:
    """In the caller's transaction on the right database the job commits with it; on the
    other database it is refused, naming both, and nothing is written anywhere."""
    app = routed(pg_url, other_db)

    @app.task(queue="email")
    def send(to: str) -> None: ...

    try:
        await app.migrate()
        wrong = await asyncpg.connect(pg_url.split("?")[0])
        schema = pg_url.split("schema=")[1]
        await wrong.execute(f'SET search_path = "{schema}"')
        try:
            async with wrong.transaction():
                # (its schema is the App's own database's; b's statements name b's schema)
                with pytest.raises(ConfigurationError, match="these jobs go to database 'b'"):
                    await send.using(connection=wrong).aenqueue("x")
                assert await wrong.fetchval("SELECT 1") == 1  # the transaction still works
        finally:
            await wrong.close()
        right = await asyncpg.connect(server_url(other_db))
        try:
            tx = right.transaction()
            await tx.start()
            handle = await send.using(connection=right).aenqueue("y")
            assert in_b(handle.id)
            await tx.rollback()  # rolled back with the caller's transaction
            async with right.transaction():
                kept = await send.using(connection=right).aenqueue("z")
        finally:
            await right.close()
        assert await rows(other_db) == [kept.id]
        assert await rows(pg_url) == []
    finally:
        await app.close()


async def test_a_workflow_lives_in_one_lane(pg_url: str, other_db: str) -> None:
    app = routed(pg_url, other_db)

    @app.task(queue="email")
    def send(to: str) -> None: ...

    @app.task
    def plain(n: int) -> None: ...

    try:
        await app.migrate()
        with pytest.raises(ConfigurationError, match="a workflow lives in one lane"):
            await skiplock.group(send.s("a"), plain.s(1)).aenqueue()
        assert await rows(other_db) == [] and await rows(pg_url) == []
        done = await skiplock.group(send.s("a"), send.s("b")).aenqueue()  # one lane: fine
        assert len(done.ids) == 2 and all(in_b(i) for i in done.ids)
    finally:
        await app.close()


def test_a_sync_callers_connection_is_checked_too(pg_url: str, other_db: str) -> None:
    """psycopg's sync connection (Django's, a script's): the same check, the same commit."""
    import psycopg

    app = routed(pg_url, other_db)

    @app.task(queue="email")
    def send(to: str) -> None: ...

    app._run_sync(app.migrate())
    try:
        refused = pytest.raises(ConfigurationError, match="these jobs go to database 'b'")
        with psycopg.connect(pg_url.split("?")[0]) as wrong, wrong.transaction(), refused:
            send.using(connection=wrong).enqueue("x")
        with psycopg.connect(server_url(other_db)) as right:
            with right.transaction():
                kept = send.using(connection=right).enqueue("y")
            assert in_b(kept.id)
            jobs = f'"{parse_postgres_url(other_db).schema}".skiplock_jobs'
            assert right.execute(f"SELECT id FROM {jobs}").fetchall() == [(kept.id,)]
    finally:
        app._run_sync(app.close())


async def test_a_lane_moves_by_draining_it_where_it_was(pg_url: str, other_db: str) -> None:
    """Lane 'eu' lives in the App's own database, with jobs waiting; then the directory moves
    it to b and names its old home in draining=. New jobs go to b at once; the workers of
    the old home keep claiming what is left there; every job runs exactly once."""
    ran: list[int] = []

    def app_with(lanes: dict[str, str], draining: dict[str, str]) -> skiplock.App:
        app = skiplock.App(
            pg_url,
            databases={"b": Database(other_db, number=1)},
            lanes=lanes,
            routes={"email": "eu"},
            draining=draining,
        )

        @app.task(queue="email", name="send")
        async def send(n: int) -> None:
            ran.append(n)

        return app

    before = app_with({"eu": "default"}, {})
    try:
        await before.migrate()
        first = await before.enqueue_many([before.tasks["send"].prepare(n) for n in range(20)])
        assert not any(in_b(h.id) for h in first)
    finally:
        await before.close()
    after = app_with({"eu": "b"}, {"eu": "default"})
    try:
        assert after.directory.lanes_served("default") == ("default", "eu")
        worker = Worker(after, concurrency=4)
        running = asyncio.create_task(worker.run(burst=True))
        moved = await after.enqueue_many([after.tasks["send"].prepare(n) for n in range(20, 40)])
        assert all(in_b(h.id) for h in moved)
        await running
        if len(ran) < 40:  # the burst may have ended before the last enqueue: once more
            await Worker(after, concurrency=4).run(burst=True)
        assert sorted(ran) == list(range(40))  # all of them, each once
    finally:
        await after.close()


async def test_a_cron_slot_runs_once_across_the_databases(pg_url: str, other_db: str) -> None:
    """Three schedulers on each database race for every slot: each schedule is claimed and
    run in the database its jobs go to, once, and the other database's schedulers leave it."""
    from datetime import UTC, datetime, timedelta

    from skiplock._worker.scheduler import Scheduler

    app = routed(pg_url, other_db)

    @app.task(queue="email", name="digest")
    def digest() -> None: ...

    @app.task(name="local")
    def local() -> None: ...

    app.schedule(digest, "* * * * *", name="digest-every-minute")
    app.schedule(local, "* * * * *", name="local-every-minute")
    try:
        await app.migrate()
        schedulers = []
        for database in ("default", "b"):
            backend = await app.backend(database=database)
            for _ in range(3):

                def owns(schedule: skiplock._schedule.Schedule, d: str = database) -> bool:
                    return app.owner_of(schedule) == d

                schedulers.append(Scheduler(app.registry, backend, owns=owns))
        start = datetime(2026, 12, 7, 12, 0, 30, tzinfo=UTC)
        for scheduler in schedulers:
            await scheduler.tick(start)  # the first tick only learns where to start
        await asyncio.gather(*(s.tick(start + timedelta(minutes=1)) for s in schedulers))
        in_other, in_own = await rows(other_db), await rows(pg_url)
        assert len(in_other) == 1 and len(in_own) == 1, (in_other, in_own)
        b = await app.backend(database="b")
        assert (await b.job_get(in_other[0])).task == "digest"  # its route's database
    finally:
        await app.close()


async def test_lanes_across_postgresql_versions(pg_url: str, pg18_url: str) -> None:
    """The App's own database on the machine's PostgreSQL 15, database b on PostgreSQL 18:
    routed enqueue, a worker over both, every job run once in its own database."""
    app = skiplock.App(
        pg_url,
        databases={"b": Database(pg18_url, number=1)},
        lanes={"eu": "b"},
        routes={"email": "eu"},
    )
    ran: list[str] = []

    @app.task(queue="email")
    async def send(to: str) -> None:
        ran.append(to)

    @app.task
    async def plain(n: int) -> None:
        ran.append(str(n))

    try:
        await app.migrate()
        b = await app.backend(database="b")
        version = await b.pool.fetchval("SHOW server_version_num")  # type: ignore[attr-defined]
        assert int(version) >= 180000
        mails = [await send.aenqueue(f"{n}@example.com") for n in range(5)]
        locals_ = [await plain.aenqueue(n) for n in range(5)]
        assert all(in_b(h.id) for h in mails) and not any(in_b(h.id) for h in locals_)
        await Worker(app, concurrency=4).run(burst=True)
        assert sorted(ran) == sorted([f"{n}@example.com" for n in range(5)] + list("01234"))
    finally:
        await app.close()


async def test_an_app_of_one_database_claims_every_lane_it_routes_to(db_url: str) -> None:
    """Lanes without a second database (a hot queue split ahead of its move, say): the one
    database's worker claims every lane, not only ``"default"``."""
    app = skiplock.App(
        db_url, lanes={"l0": "default", "l1": "default"}, routes={"hot": Split("l0", "l1")}
    )
    ran: list[str] = []

    @app.task(queue="hot", concurrency_key=lambda tenant: tenant)
    def hot(tenant: str) -> None:
        ran.append(tenant)

    @app.task
    def plain(tenant: str) -> None:
        ran.append(tenant)

    try:
        await app.migrate()
        handles = [await hot.aenqueue(t) for t in "abcdefgh"]
        handles.append(await plain.using(lane="l1").aenqueue("own"))
        handles.append(await plain.aenqueue("default"))
        worker = Worker(app, concurrency=4)
        await worker.run(burst=True)
        # with "default" alone claimed, the jobs of l0 and l1 were left pending for ever
        assert sorted(ran) == sorted([*"abcdefgh", "own", "default"])
        assert [(await app.get_job(h.id)).state for h in handles] == ["succeeded"] * 10
    finally:
        await app.close()


async def test_a_batch_refuses_a_job_routed_to_another_database(pg_url: str, other_db: str) -> None:
    """A batch lives in one database (its members' rows and its callbacks are one
    database's), the App's own when its callbacks are: a member routed elsewhere is refused
    by name, nothing written there (it was written there before, and its batch read as "no
    such batch")."""
    app = routed(pg_url, other_db)

    @app.task(queue="email")
    def send(to: str) -> None: ...

    @app.task
    def plain(n: int) -> None: ...

    @app.task
    def report(batch_id: int) -> None: ...

    try:
        await app.migrate()
        with pytest.raises(ConfigurationError, match="lives in database 'default'"):
            async with app.batch(on_complete=report.s()):
                await send.aenqueue("x")
        assert await rows(other_db) == []
        async with app.batch(on_complete=report.s()) as batch:
            member = await plain.aenqueue(1)
        assert member.id < ID_SPAN and (await app.batch_info(batch.id)).total == 1
    finally:
        await app.close()


async def test_a_batch_lives_where_its_callbacks_go(pg_url: str, other_db: str) -> None:
    """A batch whose callback is routed to a lane of another database opens there, its
    members go there, and a worker of that database runs them and then the callback once
    (before, the callback's row was written in the App's own database under the other
    database's lane, and no worker ever claimed it). Callbacks of two databases, a
    ``database=`` that is not theirs and a member of the App's own database are refused."""
    app = routed(pg_url, other_db)
    seen: list[tuple[int, int]] = []

    @app.task(queue="email")
    def send(to: str) -> None: ...

    @app.task(queue="email")
    def summary(batch_id: int, n: int) -> None:
        seen.append((batch_id, n))

    @app.task
    def plain(n: int) -> None: ...

    @app.task
    def local_report(batch_id: int) -> None: ...

    try:
        await app.migrate()
        async with app.batch(on_success=summary.s(3)) as batch:
            members = [await send.aenqueue(f"{i}@x") for i in range(3)]
        assert batch.database == "b"
        assert all(in_b(m.id) for m in members)
        assert len(await rows(other_db)) == 4 and await rows(pg_url) == []  # the callback too
        info = await app.batch_info(batch.id, database="b")
        assert info.closed and info.total == 3
        await Worker(app, database="b", poll_interval_s=0.05).run(burst=True)
        assert seen == [(batch.id, 3)]
        assert [(await app.get_job(m.id)).state for m in members] == ["succeeded"] * 3

        with pytest.raises(ConfigurationError, match="its callbacks go to 'b' and 'default'"):
            app.batch(on_success=summary.s(1), on_complete=local_report.s())
        with pytest.raises(ConfigurationError, match="its callbacks go to database 'b'"):
            app.batch(on_success=summary.s(1), database="default")
        with pytest.raises(ConfigurationError, match="lives in database 'b'"):
            async with app.batch(on_success=summary.s(1)):
                await plain.aenqueue(1)
        assert await rows(pg_url) == []
        # an existing batch of b, joined by id: its database named
        async with app.batch(on_complete=summary.s(0), close=False) as kept:
            pass
        async with app.batch(id=kept.id, database="b", close=True):
            await send.aenqueue("late@x")
        assert (await app.batch_info(kept.id, database="b")).total == 1
    finally:
        await app.close()
