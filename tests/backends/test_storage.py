"""PostgreSQL's partitioned storage (postgres_storage_sql.py): the upgrade in place, unique keys
across the live and history partitions, and the history's upkeep (days made ahead, expired
days dropped) under a drain and a session holding a lock on the oldest partition."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

import skiplock
from skiplock import JobState, Worker
from skiplock._backends import Backend
from skiplock._backends.params import (
    ClaimParams,
    JobHeartbeatManyParams,
    JobInsertManyParams,
    JobPruneParams,
)
from skiplock._backends.postgres import statements
from skiplock._backends.postgres.storage import partitions as postgres_storage
from skiplock._backends.postgres.storage import rotation as postgres_rotation
from skiplock._backends.postgres.storage import sight
from skiplock._backends.postgres.storage.generations import GEN_FIRST
from skiplock._job import Completion, Disposition, NewJob
from skiplock._worker import services

from ..helpers import (
    PG_URL,
    FakeClock,
    await_until,
    await_until_async,
    migrations_from,
    pg_admin,
    pg_schema_at,
    running,
    server_url,
    turn_of,
)
from .helpers import assert_upgraded_jobs_hold


def job(key: str | None = None, *, keep: bool = False) -> NewJob:
    return NewJob("t", "default", "[]", "{}", 0, 3, unique_key=key, unique_succeeded=keep)


@pytest.fixture
async def conn(pg_url: str) -> AsyncIterator[asyncpg.Connection]:
    session = await asyncpg.connect(server_url(pg_url))
    yield session
    await session.close()


@pytest.fixture(params=["postgres", "postgres18"])
def own_db(request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of the test's own (schema ``vac``), on the shared server or on PostgreSQL 18
    (tests/clusters.py): what a vacuum may remove depends on every open transaction in the
    same database, and the suite's other tests (xdist workers) have theirs in the shared one.
    Sessions of other databases never hold its horizon back. A plain fixture: the 18 server's
    is set up outside the test's event loop."""
    server = PG_URL if request.param == "postgres" else request.getfixturevalue("pg18_server").url
    name = f"skiplock_vac_{uuid.uuid4().hex[:10]}"
    asyncio.run(pg_admin(f'CREATE DATABASE "{name}"', server))
    url = urlunsplit(urlsplit(server)._replace(path=f"/{name}", query=""))
    yield f"{url}?schema=vac"
    asyncio.run(pg_admin(f'DROP DATABASE "{name}" WITH (FORCE)', server))


def schema_of(url: str) -> str:
    return url.rsplit("schema=", 1)[1]


async def partition_of(conn: asyncpg.Connection, schema: str, job_id: int) -> str:
    name = await conn.fetchval(
        f'SELECT tableoid::regclass::text FROM "{schema}".skiplock_jobs WHERE id = $1', job_id
    )
    return str(name).rsplit(".", 1)[-1]


VERSION_10_ROWS = """
INSERT INTO {t} (queue, task, state, max_attempts, attempt, unique_key, unique_succeeded,
                 locked_by, lease_token, lease_expires_at, result, errors, finished_at)
VALUES ('default', 'a', 'pending', 3, 0, 'k-pending', false, NULL, NULL, NULL, NULL, '[]', NULL),
       ('default', 'b', 'running', 3, 1, 'k-running', false, 'w', 'w:1',
        now() + interval '1 hour', NULL, '[]', NULL),
       ('default', 'c', 'succeeded', 3, 1, 'k-kept', true, 'w', NULL, NULL, '{"x": 1}', '[]',
        now() - interval '1 hour'),
       ('default', 'd', 'succeeded', 3, 1, 'k-free', false, 'w', NULL, NULL, '2', '[]',
        now() - interval '2 days'),
       ('other', 'e', 'cancelled', 3, 0, NULL, false, NULL, NULL, NULL, NULL, '[]',
        now() - interval '3 days'),
       ('default', 'f', 'dead', 3, 3, 'k-dead', false, 'w', NULL, NULL, NULL,
        '[{"message": "boom"}]', now() - interval '1 day'),
       ('default', 'g', 'succeeded', 3, 1, NULL, false, NULL, NULL, NULL, NULL, '[]', NULL)
"""


async def test_an_upgrade_from_version_10_keeps_every_job_result_and_key(
    pg_url: str, conn: asyncpg.Connection
) -> None:
    """A version 10 table with a job in every state (keys live, kept and spent, a result, an
    error, a final row without a finish time) upgrades in place: every row keeps every column
    (the finish time stamped where missing), each lands in its state's partition, the keys
    still held are held, and new ids follow the old ones."""
    schema = schema_of(pg_url)
    table = f'"{schema}".skiplock_jobs'
    await pg_schema_at(pg_url, 10)
    await conn.execute(VERSION_10_ROWS.replace("{t}", table))
    before = [
        json.loads(r[0])
        for r in await conn.fetch(f"SELECT to_jsonb(j)::text FROM {table} j ORDER BY id")
    ]
    app = skiplock.App(pg_url)
    try:
        assert await app.migrate() == migrations_from(pg_url, 11)
        after = [
            json.loads(r[0])
            for r in await conn.fetch(f"SELECT to_jsonb(j)::text FROM {table} j ORDER BY id")
        ]
        # every row already there is in the long segment (version 12's column)
        assert [row.pop("segment") for row in after] == [3] * len(after)
        # version 13's, 14's and 18's columns: no job of before has a concurrency key or a
        # window, and each key of before is its task's own (NULL: no job row is rewritten)
        added = ("concurrency_key", "key_limit", "key_order", "unique_until", "key_weight")
        added += ("unique_scope",)
        keys = {tuple(r.pop(name) for name in added) for r in after}
        assert keys == {(None,) * len(added)}
        # version 28's: every job of before is in the default lane
        assert {r.pop("lane") for r in after} == {"default"}
        stamped = after[6].pop("finished_at")
        assert stamped is not None and before[6].pop("finished_at") is None
        assert after == before
        ids = [row["id"] for row in before]
        places = [await partition_of(conn, schema, i) for i in ids]
        assert places[:2] == ["skiplock_jobs_live_long"] * 2
        assert places[5] == "skiplock_jobs_dead"
        assert all(p.startswith("skiplock_jobs_done_to_") for p in places[2:5] + places[6:])
        held = f'SELECT unique_key, unique_scope, job_id FROM "{schema}".skiplock_keys'
        keys = {(r[0], r[1]): r[2] for r in await conn.fetch(held)}
        assert keys == {("k-pending", "a"): ids[0], ("k-running", "b"): ids[1]} | {
            ("k-kept", "c"): ids[2]
        }

        await assert_upgraded_jobs_hold(app, ids)
    finally:
        await app.close()


async def test_a_kept_key_holds_across_the_move_to_history_and_a_spent_one_frees(
    pg_url: str, conn: asyncpg.Connection
) -> None:
    """A job that keeps its key after success keeps it from history; one that does not frees
    it when it finishes; a dead job whose key a live job took stays dead when requeued."""
    app = skiplock.App(pg_url)
    await app.migrate()
    try:
        backend = await app.backend()
        kept, spent = await backend.job_insert_many(
            JobInsertManyParams([job("kept", keep=True), job("spent")])
        )
        calls = []

        @app.task(name="t")
        def t() -> None:
            calls.append(1)

        await asyncio.wait_for(
            Worker(app, poll_interval_s=0.05, scheduler=False).run(burst=True), 60
        )
        assert len(calls) == 2
        schema = schema_of(pg_url)
        assert (await partition_of(conn, schema, kept)).startswith("skiplock_jobs_done_")
        again = await backend.job_insert_many(
            JobInsertManyParams([job("kept", keep=True), job("spent")])
        )
        assert again[0] == kept and again[1] > spent
        keys = dict(await conn.fetch(f'SELECT unique_key, job_id FROM "{schema}".skiplock_keys'))
        assert keys == {"kept": kept, "spent": again[1]}
    finally:
        await app.close()


async def make_day(conn: asyncpg.Connection, url: str, day: datetime, rows: int) -> str:
    """A history partition of ``day`` in ``url``'s schema (made by the upkeep, as of that
    day) holding ``rows`` succeeded jobs."""
    schema = schema_of(url)
    app = app_at(url, day)
    try:
        await (await app.backend()).storage_upkeep()
    finally:
        await app.close()
    name = postgres_storage.day_name(day)
    assert name in await partitions(conn, schema)
    await conn.execute(
        f"""INSERT INTO "{schema}".skiplock_jobs (queue, task, state, max_attempts, attempt,
                                                   finished_at)
            SELECT 'default', 'old', 'succeeded', 3, 1, $1 FROM generate_series(1, $2)""",
        day + timedelta(hours=1),
        rows,
    )
    return name


async def partitions(conn: asyncpg.Connection, schema: str) -> set[str]:
    rows = await conn.fetch(postgres_storage.LIST_PARTITIONS.replace("{s}", f'"{schema}"'))
    return {r["relname"] for r in rows}


def app_at(url: str, now: datetime) -> skiplock.App:
    return skiplock.App(url, clock=FakeClock(now))


async def ddl_waiting(conn: asyncpg.Connection, table: str) -> bool:
    """Whether a session waits for a lock with a statement naming ``table``."""
    return bool(
        await conn.fetchval(
            """SELECT count(*) FROM pg_stat_activity
               WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0""",
            table,
        )
    )


async def test_expired_days_drop_whole_and_a_locked_one_waits_without_stalling_the_queue(
    pg_url: str, conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two expired days of history, the older held by a session's lock (a long report): the
    prune's DDL waits for that lock holding nothing else, so jobs are claimed and finished
    (their rows moving into history) while it waits; the free day goes whole, its rows
    counted; once the lock goes, the locked day goes too."""
    monkeypatch.setattr(postgres_storage, "TRIES", 200)  # 200 x 100 ms: waits out the drain
    schema = schema_of(pg_url)
    app = skiplock.App(pg_url)
    await app.migrate()
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    old = midnight + timedelta(days=40)
    locked = await make_day(conn, pg_url, old, 300)
    free = await make_day(conn, pg_url, old + timedelta(days=1), 500)
    done: list[int] = []

    @app.task(name="fresh")
    def fresh() -> None:
        done.append(1)

    holder = await asyncpg.connect(server_url(pg_url))
    pruner = app_at(pg_url, old + timedelta(days=10))
    try:
        await holder.execute("BEGIN")
        await holder.fetchval(f'SELECT count(*) FROM "{schema}".{locked}')
        backend = await pruner.backend()
        prune = asyncio.create_task(backend.job_prune(JobPruneParams(7 * 86400.0, 30 * 86400.0, 0)))
        while not await ddl_waiting(conn, locked):
            assert not prune.done(), prune
            await asyncio.sleep(0.01)
        await app.enqueue_many(fresh.prepare() for _ in range(200))
        worker = Worker(app, poll_interval_s=0.01, scheduler=False)
        await asyncio.wait_for(worker.run(burst=True), 60)
        assert len(done) == 200 and not prune.done()  # the DDL still waits on the report
        await holder.execute("ROLLBACK")
        removed = await asyncio.wait_for(prune, 60)
        assert removed == 800
        left = await partitions(conn, schema)
        assert locked not in left and free not in left
        assert (await app.counts())[JobState.SUCCEEDED.value] == 200
    finally:
        await holder.close()
        await pruner.close()
        await app.close()


async def test_an_upkeep_whose_view_went_stale_leaves_what_another_made_or_dropped(
    pg_url: str, conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two upkeeps read the partition list, then take turns at the upkeep lock (parallel
    ``migrate`` runs, two workers' pruners): the second one's list is stale by its turn. It
    must neither make a day the first made ("relation ... already exists" failed a deploy's
    parallel migrations) nor drop one the first dropped: it checks under the lock."""
    schema = schema_of(pg_url)
    app = skiplock.App(pg_url)
    await app.migrate()
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    old = await make_day(conn, pg_url, midnight - timedelta(days=40), 3)
    ahead = postgres_storage.day_name(midnight.date() + timedelta(days=postgres_storage.DAYS_AHEAD))
    await conn.execute(f'DROP TABLE "{schema}".{ahead}')
    stale = await postgres_storage._parts(conn, schema)  # what the second read before its turn

    async def stale_parts(_conn: object, _schema: str) -> list[postgres_storage.Partition]:
        return stale

    other = await asyncpg.connect(server_url(pg_url))
    try:
        assert await postgres_storage.make_ahead(other, schema, midnight, analyze=False) == [ahead]
        cutoff = midnight - timedelta(days=30)
        assert await postgres_storage.drop_expired(other, schema, cutoff) == 3
        monkeypatch.setattr(postgres_storage, "_parts", stale_parts)
        assert await postgres_storage.make_ahead(conn, schema, midnight, analyze=False) == []
        assert await postgres_storage.drop_expired(conn, schema, cutoff) == 0
    finally:
        await other.close()
        await app.close()
    left = await partitions(conn, schema)
    assert ahead in left and old not in left


async def dead_live_rows(conn: asyncpg.Connection, schema: str, n: int) -> None:
    """``n`` dead versions in the live partition (jobs enqueued, then deleted), counted in the
    server's statistics at once (not at the session's next flush, up to 10 s later)."""
    table = f'"{schema}".skiplock_jobs'
    await conn.execute(
        f"""INSERT INTO {table} (queue, task, state, max_attempts, attempt)
            SELECT 'default', 'gone', 'pending', 3, 0 FROM generate_series(1, $1)""",
        n,
    )
    async with conn.transaction():  # its end reports the statistics, forced
        await conn.execute(f"DELETE FROM {table} WHERE task = 'gone'")
        await conn.execute("SELECT pg_stat_force_next_flush()")


async def live_vacuums(conn: asyncpg.Connection, schema: str) -> int:
    return int(
        await conn.fetchval(
            "SELECT max(vacuum_count) FROM pg_stat_all_tables WHERE relid IN"
            " (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass($1))",
            f'"{schema}".skiplock_jobs_live',
        )
    )


async def test_the_hot_vacuum_removes_the_live_rows_dead_versions_past_its_threshold(
    own_db: str,
) -> None:
    """Below the threshold nothing runs; past it the live partition is vacuumed and its dead
    versions go (autovacuum would come once a minute)."""
    schema = schema_of(own_db)
    app = skiplock.App(own_db)
    conn = await asyncpg.connect(own_db.split("?")[0])
    try:
        await app.migrate()
        backend = await app.backend()
        await dead_live_rows(conn, schema, 3_000)
        assert await backend.hot_vacuum(5_000) is None
        assert await live_vacuums(conn, schema) == 0
        done = await backend.hot_vacuum(2_000)
        assert done is not None and done.dead_before >= 3_000 and done.dead_after < 100, done
        # and the vacuum's own report: what it removed, nothing it had to keep
        assert done.removed is not None and done.removed >= 3_000 and done.kept == 0, done
        assert not done.held and not done.skipped
        assert await live_vacuums(conn, schema) == 1
    finally:
        await conn.close()
        await app.close()


async def test_the_hot_vacuum_says_when_a_held_horizon_keeps_them_and_never_waits(
    own_db: str,
) -> None:
    """A transaction that began before the rows died keeps them: the vacuum reports them left
    (the worker then backs off). A session holding a lock that conflicts with VACUUM's (another
    vacuum, a DDL) makes it skip the table at once, never queue behind it."""
    schema = schema_of(own_db)
    app = skiplock.App(own_db)
    conn = await asyncpg.connect(own_db.split("?")[0])
    holder = await asyncpg.connect(own_db.split("?")[0])
    try:
        await app.migrate()
        backend = await app.backend()
        await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await holder.fetchval("SELECT txid_current()")
        await dead_live_rows(conn, schema, 3_000)
        held = await backend.hot_vacuum(2_000)
        assert held is not None and held.dead_after * 2 > held.dead_before, held
        assert held.kept is not None and held.kept >= 3_000 and held.removed == 0, held
        assert held.held
        await holder.execute("ROLLBACK")
        await holder.execute("BEGIN")
        await holder.execute(
            f'LOCK TABLE "{schema}".skiplock_jobs_live IN SHARE UPDATE EXCLUSIVE MODE'
        )
        vacuums = await live_vacuums(conn, schema)
        skipped = await asyncio.wait_for(backend.hot_vacuum(2_000), 10)
        assert skipped is not None and skipped.dead_after == skipped.dead_before, skipped
        assert skipped.skipped and not skipped.held
        assert await live_vacuums(conn, schema) == vacuums
    finally:
        await holder.close()
        await conn.close()
        await app.close()


async def test_a_worker_vacuums_the_live_rows(own_db: str) -> None:
    """The worker's vacuumer looks every ``vacuum_interval_s`` and vacuums past its threshold;
    with 0 it leaves the table to autovacuum."""
    schema = schema_of(own_db)
    app = skiplock.App(own_db)
    conn = await asyncpg.connect(own_db.split("?")[0])
    try:
        await app.migrate()
        await dead_live_rows(conn, schema, 12_000)
        async with running(app, vacuum_interval_s=0, rotate_interval_s=0) as off:
            await asyncio.wait_for(off.ready.wait(), 30)
            assert "vacuumer" not in off.status()["services"]
        worker = Worker(app, vacuum_interval_s=0.05, scheduler=False)
        run = asyncio.create_task(worker.run())
        try:
            await asyncio.wait_for(worker.ready.wait(), 30)
            assert "vacuumer" in worker.status()["services"]
            for _ in range(600):
                if await live_vacuums(conn, schema) > 0:
                    break
                await asyncio.sleep(0.05)
            assert await live_vacuums(conn, schema) > 0
        finally:
            worker.request_stop()
            await asyncio.wait_for(run, 30)
    finally:
        await conn.close()
        await app.close()


def test_partition_names_carry_their_bounds() -> None:
    parts = postgres_storage.partitions(
        [
            "skiplock_jobs_done_p20261203",
            "skiplock_jobs_done_to_20261201",
            "skiplock_jobs_done_default",
            "stranger",
        ]
    )
    assert [(p.lower, p.upper) for p in parts] == [
        (None, datetime(2026, 12, 1).date()),
        (datetime(2026, 12, 3).date(), datetime(2026, 12, 4).date()),
    ]
    cutoff = datetime(2026, 12, 4, tzinfo=UTC)
    assert [p.name for p in postgres_storage.expired(parts, cutoff)] == [
        "skiplock_jobs_done_to_20261201",
        "skiplock_jobs_done_p20261203",
    ]
    assert postgres_storage.missing(parts, datetime(2026, 12, 3).date()) == [
        datetime(2026, 12, 4).date(),
        datetime(2026, 12, 5).date(),
    ]


# -- the live partition's generations ------------------------------------------------------------


def segment_table(schema: str, segment: int) -> str:
    return f'"{schema}".{postgres_rotation.segment_name(segment)}'


async def current_segment(conn: asyncpg.Connection, schema: str) -> int:
    """The generation new jobs go to now."""
    return int(await conn.fetchval(postgres_rotation.pointer_sql(f'"{schema}"')))


async def finished_in_segment(conn: asyncpg.Connection, schema: str, n: int) -> int:
    """``n`` jobs written to the generation taking new jobs (the column's default) and
    finished: their live versions dead there; the generation's number."""
    table = f'"{schema}".skiplock_jobs'
    segments = await conn.fetch(
        f"""INSERT INTO {table} (queue, task, state, max_attempts)
            SELECT 'default', 'done', 'pending', 3 FROM generate_series(1, $1)
            RETURNING segment""",
        n,
    )
    await conn.execute(
        f"""UPDATE {table} SET state = 'succeeded', finished_at = now()
            WHERE state = 'pending' AND task = 'done'"""
    )
    assert {r[0] for r in segments} == {await current_segment(conn, schema)}
    return int(segments[0][0])


async def relation_bytes(conn: asyncpg.Connection, table: str) -> tuple[int, int]:
    row = await conn.fetchrow(
        "SELECT pg_relation_size($1::regclass), pg_indexes_size($1::regclass)", table
    )
    return int(row[0]), int(row[1])


async def generation_tables(conn: asyncpg.Connection, schema: str) -> dict[str, bool]:
    """Every generation table and wrapper left in the schema: whether it is pending detach."""
    rows = await conn.fetch(postgres_rotation.TABLES, f'"{schema}"')
    return {r["relname"]: r["pending"] for r in rows}


async def claim_plan(conn: asyncpg.Connection, schema: str) -> str:
    """The tables a claim of the default queue reads now, by a fresh plan."""
    rows = await conn.fetch(
        f"""EXPLAIN SELECT id FROM "{schema}".skiplock_jobs
            WHERE state = 'pending' AND queue = 'default' AND segment <> 4
            ORDER BY priority DESC, run_at, id LIMIT 10 FOR UPDATE SKIP LOCKED"""
    )
    return "\n".join(r[0] for r in rows)


async def until_dropped(backend: Backend, conn: asyncpg.Connection, schema: str) -> None:
    """Turn until only the newest generation, the one before it and the spare made ahead are
    left, every table and wrapper of the older ones detached and dropped (a turn finishes what
    it can in rotation.CATCH_UP_S; a reader's own snapshot may hold some a turn longer)."""
    for _ in range(60):
        await backend.rotate_live(1 << 30)  # finish and drop; never a new generation
        left = await generation_tables(conn, schema)
        if len(left) <= 6 and not any(left.values()):  # the newest, the one before, the spare
            return
    raise AssertionError(f"generations left: {left}")


@contextlib.asynccontextmanager
async def migrated_own(own_db: str) -> AsyncIterator[tuple[str, Backend, asyncpg.Connection]]:
    """The test database's schema migrated: its name, the app's backend and a plain session
    (closed, with the app, on the way out)."""
    app = skiplock.App(own_db)
    conn = await asyncpg.connect(own_db.split("?")[0])
    try:
        await app.migrate()
        yield schema_of(own_db), await app.backend(), conn
    finally:
        await conn.close()
        await app.close()


async def test_a_retired_generation_leaves_with_its_dead_versions_under_a_held_horizon(
    own_db: str,
) -> None:
    """With a transaction holding the MVCC horizon, a vacuum must keep every dead version; the
    generation's retirement detaches and drops its table with them in the same turn (the
    holder locks none of the job tables, so the detach waits for nothing), while the holder
    still holds, and the finished jobs stay in history."""
    holder = await asyncpg.connect(own_db.split("?")[0])
    async with migrated_own(own_db) as (schema, backend, conn):
        await holder.execute("BEGIN")
        await holder.fetchval("SELECT txid_current()")
        segment = await finished_in_segment(conn, schema, 3_000)
        kept = await backend.hot_vacuum(0)
        assert kept is not None and kept.kept is not None and kept.kept >= 3_000, kept
        heap, indexes = await relation_bytes(conn, segment_table(schema, segment))
        assert heap > 100_000 and indexes > 100_000
        assert postgres_rotation.segment_name(segment) in await claim_plan(conn, schema)
        done = await turn_of(backend, segment)
        assert done.detached and done.moved == 0 and not done.held, done
        assert done.dropped >= 1 and done.pending == 0, done
        assert postgres_rotation.segment_name(segment) not in await claim_plan(conn, schema)
        assert postgres_rotation.segment_name(segment) not in await generation_tables(conn, schema)
        finished = await conn.fetchval(
            f"""SELECT count(*) FROM "{schema}".skiplock_jobs WHERE state = 'succeeded'"""
        )
        assert finished == 3_000
        await holder.execute("COMMIT")
    await holder.close()


async def test_leftover_jobs_move_aside_keeping_their_lease_and_key(own_db: str) -> None:
    """A running job, a delayed one and a keyed one left in the generation move to the long
    segment, once, before the detach: the running job's worker still finishes it under its
    token, the key stays held, the delayed job keeps its time."""
    async with migrated_own(own_db) as (schema, backend, conn):
        segment = await finished_in_segment(conn, schema, 10)
        running, delayed, keyed = await backend.job_insert_many(
            JobInsertManyParams([job(), job(), job("held-key")])
        )
        table = f'"{schema}".skiplock_jobs'
        await conn.execute(
            f"UPDATE {table} SET run_at = now() + interval '1 hour' WHERE id = $1", delayed
        )
        await conn.execute(f"UPDATE {table} SET priority = 1 WHERE id = $1", running)
        claimed = await backend.job_get_available(ClaimParams(None, 1, "w", "tok", 60.0, 5.0))
        assert [c.id for c in claimed] == [running]
        run_at = await conn.fetchval(f"SELECT run_at FROM {table} WHERE id = $1", delayed)
        held = [(running, claimed[0].lease_token)]

        async def beat(segments: set[int]) -> list[tuple[int, str]]:
            params = JobHeartbeatManyParams(held, 60.0, 5.0, segments=frozenset(segments))
            return await backend.job_heartbeat_many(params)

        # a heartbeat reads the segments its jobs were claimed from (and the long one) alone:
        # named another, it does not find the row
        assert await beat({segment}) == held
        assert await beat({segment + 1}) == []

        woken: asyncio.Queue[str] = asyncio.Queue()
        await conn.add_listener(f"skiplock_{schema}", lambda *n: woken.put_nowait(n[-1]))
        done = await turn_of(backend, segment)
        assert (done.moved, done.detached, done.held) == (3, True, False), done
        # the pending jobs moved wake their queue's workers: a claim that skipped them while
        # the move held them does not wait out its poll interval
        assert await asyncio.wait_for(woken.get(), timeout=10) == "default"
        assert woken.empty()  # one wake-up for the queue, not one per job
        for job_id in (running, delayed, keyed):
            assert await partition_of(conn, schema, job_id) == "skiplock_jobs_live_long"
        assert await conn.fetchval(f"SELECT run_at FROM {table} WHERE id = $1", delayed) == run_at
        assert await beat({segment}) == held  # moved while it ran: found in the long segment
        # the worker's outcome names the segment it claimed from: missed there, written in
        # the long one; a stale token is found in neither
        assert claimed[0].segment == segment
        stale = Completion(running, "someone-else", Disposition.SUCCEED, segment=segment)
        assert await backend.job_set_state_if_running_many([stale]) == []
        token = claimed[0].lease_token
        finish = Completion(running, token, Disposition.SUCCEED, segment=segment)
        assert await backend.job_set_state_if_running_many([finish]) == [running]
        assert await partition_of(conn, schema, running) != "skiplock_jobs_live_long"
        assert await backend.job_insert_many(JobInsertManyParams([job("held-key")])) == [keyed]
        await until_dropped(backend, conn, schema)
        assert postgres_rotation.segment_name(segment) not in await generation_tables(conn, schema)


async def test_a_reader_holding_the_job_table_never_holds_the_rotation(own_db: str) -> None:
    """A report in REPEATABLE READ holding ACCESS SHARE on every partition for its whole run:
    generation after generation is retired under it (out of every new query's sight, claims'
    included, with its dead versions), enqueues and claims go on, and no generation the claims
    read holds the dead versions of more than the last two; once the report ends, the retired
    tables and their wrappers are dropped."""
    reader = await asyncpg.connect(own_db.split("?")[0])
    async with migrated_own(own_db) as (schema, backend, conn):
        await reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await reader.fetchval(f'SELECT count(*) FROM "{schema}".skiplock_jobs')
        retired = []
        for _ in range(4):
            segment = await finished_in_segment(conn, schema, 500)
            retired.append(segment)
            # the report reads again, in the same transaction: its locks reach each new table
            await reader.fetchval(f'SELECT count(*) FROM "{schema}".skiplock_jobs')
            done = await turn_of(backend, segment)
            assert done.detached and not done.held, done
            plan = await claim_plan(conn, schema)
            assert all(postgres_rotation.segment_name(n) not in plan for n in retired), plan
            ids = await asyncio.wait_for(backend.job_insert_many(JobInsertManyParams([job()])), 10)
            claimed = await asyncio.wait_for(
                backend.job_get_available(ClaimParams(None, 10, "w", "tok", 60.0, 5.0)), 10
            )
            assert [c.id for c in claimed] == ids
            await backend.job_set_state_if_running_many(
                [
                    Completion(c.id, c.lease_token, Disposition.SUCCEED, segment=c.segment)
                    for c in claimed
                ]
            )
        # the first, which the report read, waits for it, out of sight; the others are pending
        # or gone (whether a REPEATABLE READ report's later reads reach a table attached after
        # its snapshot is PostgreSQL's business: either way no claim waits)
        left = await generation_tables(conn, schema)
        assert left[postgres_rotation.segment_name(retired[0])], left
        assert all(left.get(postgres_rotation.segment_name(n), True) for n in retired), left
        # the reader still reads what its snapshot holds, the retired tables included
        assert await reader.fetchval(f'SELECT count(*) FROM "{schema}".skiplock_jobs') == 0
        await reader.execute("COMMIT")
        await until_dropped(backend, conn, schema)
        left = await generation_tables(conn, schema)
        assert all(postgres_rotation.segment_name(n) not in left for n in retired), left
        assert all(postgres_rotation.wrapper_name(n) not in left for n in retired), left
        done = await conn.fetchval(
            f"""SELECT count(*) FROM "{schema}".skiplock_jobs WHERE state = 'succeeded'"""
        )
        assert done == 4 * 500 + 4
    await reader.close()


async def test_the_generations_a_reader_held_all_leave_in_one_turn_once_it_ends(
    own_db: str,
) -> None:
    """A report held five generations retired under it: once it ends, the next turn finishes,
    detaches and drops them all, not one a turn (each detach makes every session plan its
    job-table statements again: twenty turns of that had kept W9's recovery p99 high)."""
    reader = await asyncpg.connect(own_db.split("?")[0])
    async with migrated_own(own_db) as (schema, backend, conn):
        await reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        for _ in range(7):
            await reader.fetchval(f'SELECT count(*) FROM "{schema}".skiplock_jobs')
            done = await backend.rotate_live(0)  # a new generation each turn, the old retired
            assert done is not None and done.advanced is not None, done
        held = await generation_tables(conn, schema)
        assert sum(held.values()) >= 5, held  # detaches pending on the reader
        await reader.execute("COMMIT")
        done = await backend.rotate_live(1 << 30)  # finish and drop; never a new generation
        assert done is not None and done.pending == 0, done
        left = await generation_tables(conn, schema)
        assert len(left) <= 6 and not any(left.values()), left  # newest, the one before, spare
    await reader.close()


async def test_a_reader_holding_on_stops_new_generations_at_the_cap(
    own_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each generation left waiting for a reader is a wrapper every plan expands: past
    MOST_WAITING of them the newest is no longer replaced, however many turns pass, and the
    generations go on once the reader ends."""
    monkeypatch.setattr(postgres_rotation, "MOST_WAITING", 3)
    reader = await asyncpg.connect(own_db.split("?")[0])
    async with migrated_own(own_db) as (schema, backend, conn):
        await reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        advanced = []
        for _ in range(12):
            await reader.fetchval(f'SELECT count(*) FROM "{schema}".skiplock_jobs')
            done = await backend.rotate_live(0)
            assert done is not None
            advanced.append(done.advanced)
        assert advanced[-4:] == [None] * 4, advanced
        waiting = list(await generation_tables(conn, schema))
        assert len(waiting) <= 2 * (3 + 2) + 2, waiting  # tables and wrappers
        await reader.execute("COMMIT")
        await until_dropped(backend, conn, schema)
        done = await backend.rotate_live(0)
        assert done is not None and done.advanced is not None, done
    await reader.close()


async def test_a_job_written_to_a_retired_generation_late_is_moved_back_and_runs(
    own_db: str,
) -> None:
    """A statement whose snapshot is older than a generation's detach still sees the table and
    can write a job to it after the move: the job is out of the claims' sight until the
    detach is finished, then moved back to the long segment, woken for, and claimed once."""
    late = await asyncpg.connect(own_db.split("?")[0])
    async with migrated_own(own_db) as (schema, backend, conn):
        segment = await finished_in_segment(conn, schema, 10)
        await late.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await late.fetchval(f'SELECT count(*) FROM "{schema}".skiplock_jobs')
        done = await turn_of(backend, segment)
        assert done.detached and done.pending >= 1, done
        job_id = await late.fetchval(
            f"""INSERT INTO "{schema}".skiplock_jobs (queue, task, max_attempts, segment)
                VALUES ('default', 'late', 3, $1) RETURNING id""",
            segment,
        )
        await late.execute("COMMIT")
        woken: asyncio.Queue[str] = asyncio.Queue()
        await conn.add_listener(f"skiplock_{schema}", lambda *n: woken.put_nowait(n[-1]))
        await until_dropped(backend, conn, schema)
        assert await asyncio.wait_for(woken.get(), timeout=10) == "default"
        assert await partition_of(conn, schema, job_id) == "skiplock_jobs_live_long"
        claimed = await backend.job_get_available(ClaimParams(None, 10, "w", "tok", 60.0, 5.0))
        assert [c.id for c in claimed] == [job_id]
    await late.close()


async def test_a_job_back_from_history_after_its_generation_went_lands_in_the_newest(
    own_db: str,
) -> None:
    """A dead job retried by a person, a succeeded one by your own SQL: each left the live
    jobs from a generation since retired and dropped, and comes back to the newest one
    (skiplock_segment_back), then is claimed."""
    async with migrated_own(own_db) as (schema, backend, conn):
        table = f'"{schema}".skiplock_jobs'
        dead, done = await backend.job_insert_many(JobInsertManyParams([job(), job()]))
        old = await current_segment(conn, schema)
        await conn.execute(
            f"UPDATE {table} SET state = 'dead', finished_at = now() WHERE id = $1", dead
        )
        await conn.execute(
            f"UPDATE {table} SET state = 'succeeded', finished_at = now() WHERE id = $1", done
        )
        await turn_of(backend, old)
        await until_dropped(backend, conn, schema)
        assert postgres_rotation.segment_name(old) not in await generation_tables(conn, schema)
        app = skiplock.App(own_db)
        try:
            await app.retry_job(dead)
        finally:
            await app.close()
        await conn.execute(f"UPDATE {table} SET state = 'pending' WHERE id = $1", done)
        newest = postgres_rotation.segment_name(await current_segment(conn, schema))
        assert await partition_of(conn, schema, dead) == newest
        assert await partition_of(conn, schema, done) == newest
        claimed = await backend.job_get_available(ClaimParams(None, 10, "w", "tok", 60.0, 5.0))
        assert sorted(c.id for c in claimed) == sorted([dead, done])


async def test_a_long_insert_across_an_advance_finds_its_rows_generation(own_db: str) -> None:
    """A statement keeps the partitions it first routed to for its whole run, and a row of
    your own INSERT reads the column's default when it is made: the generation the pointer
    moves to mid-statement was made a turn ahead, so the rows after the move find it."""
    async with migrated_own(own_db) as (schema, backend, conn):
        first = await current_segment(conn, schema)
        slow = asyncio.create_task(
            conn.fetch(
                f"""INSERT INTO "{schema}".skiplock_jobs (queue, task, max_attempts)
                    SELECT 'default', 'slow', 3 FROM generate_series(1, 6) n
                    WHERE pg_sleep(CASE WHEN n > 1 THEN 0.3 ELSE 0 END) IS NOT NULL
                    RETURNING segment"""
            )
        )
        other = await asyncpg.connect(own_db.split("?")[0])
        try:
            # the first row routed (the statement holds the generation's table), then the
            # pointer moves on
            leaf = f'"{schema}".{postgres_rotation.segment_name(first)}'
            while not await other.fetchval(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = to_regclass($1)"
                " AND mode = 'RowExclusiveLock' AND granted AND pid <> pg_backend_pid())",
                leaf,
            ):
                await asyncio.sleep(0.01)
            done = await backend.rotate_live(0)
            assert done is not None and done.advanced == postgres_rotation.next_segment(first)
        finally:
            await other.close()
        segments = [r[0] for r in await asyncio.wait_for(slow, 30)]
        assert segments[0] == first and segments[-1] == done.advanced, segments


async def test_users_own_insert_goes_to_the_newest_generation(own_db: str) -> None:
    """The column's default follows the rotation: a row a person inserts with their own SQL
    (no segment named) lands in the generation taking new jobs, turn after turn."""
    async with migrated_own(own_db) as (schema, backend, conn):
        for _ in range(3):
            newest = await current_segment(conn, schema)
            job_id = await conn.fetchval(
                f"""INSERT INTO "{schema}".skiplock_jobs (queue, task, max_attempts)
                    VALUES ('default', 'mine', 3) RETURNING id"""
            )
            assert await partition_of(conn, schema, job_id) == postgres_rotation.segment_name(
                newest
            )
            done = await backend.rotate_live(0)
            assert done is not None and done.advanced == postgres_rotation.next_segment(newest)


async def test_an_upgrade_from_the_ring_moves_its_live_jobs_to_the_long_segment(
    pg_url: str, conn: asyncpg.Connection
) -> None:
    """Migration 27 on a schema with live jobs in the ring: they move to the long segment and
    run; the ring's tables are gone; new jobs go to the first generation."""
    schema = schema_of(pg_url)
    table = f'"{schema}".skiplock_jobs'
    await pg_schema_at(pg_url, 26)
    ids = [
        await conn.fetchval(
            f"INSERT INTO {table} (queue, task, max_attempts, segment)"
            " VALUES ('default', 't', 3, $1) RETURNING id",
            n,
        )
        for n in (0, 1, 2)
    ]
    app = skiplock.App(pg_url)
    try:
        assert await app.migrate() == migrations_from(pg_url, 27)
        for job_id in ids:
            assert await partition_of(conn, schema, job_id) == "skiplock_jobs_live_long"
        left = await conn.fetch(
            "SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace"
            " AND relname ~ '^skiplock_jobs_live_s[0-9]$'",
            schema,
        )
        assert left == []
        backend = await app.backend()
        [new] = await backend.job_insert_many(JobInsertManyParams([job()]))
        first = postgres_rotation.segment_name(GEN_FIRST)
        assert await partition_of(conn, schema, new) == first
        claimed = await backend.job_get_available(ClaimParams(None, 10, "w", "tok", 60.0, 5.0))
        assert sorted(c.id for c in claimed) == sorted([*ids, new])
    finally:
        await app.close()


async def test_a_drain_across_rotations_runs_every_job_once(
    own_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker rotating every 50 ms (any size) while jobs arrive over several turns:
    generations are made, retired and dropped under the drain, and every job runs exactly once
    and succeeds."""
    monkeypatch.setattr(services, "ROTATE_MIN_BYTES", 0)
    schema = schema_of(own_db)
    app = skiplock.App(own_db)
    conn = await asyncpg.connect(own_db.split("?")[0])
    ran: list[int] = []

    @app.task(name="count")
    async def count(n: int) -> None:
        ran.append(n)

    async def files() -> set[str]:
        return set(await generation_tables(conn, schema))

    try:
        await app.migrate()
        seen = await files()
        first = len(seen)
        sent = 0
        async with running(app, rotate_interval_s=0.05, vacuum_interval_s=0, scheduler=False):
            # until three more generations were made and one was dropped, jobs keep coming
            while len(seen) < first + 6 or (seen - await files()) == set():
                await app.enqueue_many([count.prepare(sent + i) for i in range(50)])
                sent += 50
                await await_until(lambda n=sent - 50: len(ran) >= n, "the drain keeps up")
                seen |= await files()
                assert sent < 20_000, "no generation was retired"
            await await_until(lambda: len(ran) >= sent, "every job ran")
        assert sorted(ran) == list(range(sent))
        states = await conn.fetch(
            f'SELECT state, count(*) FROM "{schema}".skiplock_jobs GROUP BY state'
        )
        assert dict(states) == {"succeeded": sent}
    finally:
        await conn.close()
        await app.close()


# The ordinary claims name the live segments they read (postgres/storage/sight.py): a retired
# generation whose reader still holds it stays attached as an empty wrapper, and a plan of the
# job table expands (and locks) every one; the claims' text names the generations a new query
# reads instead, so no waiting wrapper is planned, locked or waited on by a claim. And a claim
# whose named set the rotation has outrun (the pointer moved to a generation made after the set
# was read) claims the new generation's jobs in the same call.


def claim_params(limit: int = 10) -> ClaimParams:
    return ClaimParams(None, limit, "w", "tok", 60.0, 5.0)


async def test_a_claim_never_plans_or_locks_a_generation_waiting_for_its_reader(
    own_db: str,
) -> None:
    """Four generations retired under a REPEATABLE READ report wait for it, attached as empty
    wrappers: the claim as it is written (every live segment) locks each of them at planning;
    the claim a backend runs names the generations in sight and locks none of them, and its
    rows and pointer are what they should be."""
    reader = await asyncpg.connect(own_db.split("?")[0])
    async with migrated_own(own_db) as (schema, backend, conn):
        await reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        for _ in range(6):
            await reader.fetchval(f'SELECT count(*) FROM "{schema}".skiplock_jobs')
            assert (await backend.rotate_live(0)) is not None
        tables = await generation_tables(conn, schema)
        waiting = {name for name, pending in tables.items() if pending}
        wrappers = {n for n in tables if n.endswith("_p")}
        assert len(waiting) >= 3, tables  # retired, held by the reader
        in_sight = await sight.read_sight(conn, schema)
        pointer = await current_segment(conn, schema)
        assert pointer in in_sight
        assert all(postgres_rotation.segment_name(n) not in waiting for n in in_sight)
        args = [None, 10, "w", "tok", 60.0, 5.0, None, False, "default"]
        every = statements.Statements.for_schema(schema).JOB_GET_AVAILABLE
        named = statements.named_claim(schema, "JOB_GET_AVAILABLE", in_sight)
        held_wrappers = {
            postgres_rotation.wrapper_name(int(n.rsplit("_s", 1)[1]))
            for n in waiting
            if not n.endswith("_p")
        }
        assert held_wrappers <= wrappers
        assert held_wrappers <= await locked_in_transaction(conn, every, *args)
        locked = await locked_in_transaction(conn, named, *args)
        assert not (held_wrappers & locked), locked
        assert {postgres_rotation.segment_name(pointer), "skiplock_jobs_live_long"} <= locked
        # A DDL (a person's, or a rotation's finish) queued on a waiting wrapper behind the
        # reader: every later lock of that wrapper queues behind it, until the reader ends.
        ids = await backend.job_insert_many(JobInsertManyParams([job(), job()]))
        ddl = await asyncpg.connect(own_db.split("?")[0])
        wrapper = sorted(held_wrappers)[0]
        queued = asyncio.create_task(
            ddl.execute(
                f"""SET lock_timeout = '60s'; BEGIN;
                    LOCK TABLE "{schema}".{wrapper} IN ACCESS EXCLUSIVE MODE; ROLLBACK"""
            )
        )
        await await_until_waiting(conn, wrapper)
        claimed = await asyncio.wait_for(backend.job_get_available(claim_params()), 20)
        assert sorted(c.id for c in claimed) == sorted(ids)
        await reader.execute("COMMIT")
        await asyncio.wait_for(queued, 60)
        await ddl.close()
    await reader.close()


async def await_until_waiting(conn: asyncpg.Connection, table: str) -> None:
    """Until some session waits for a lock on ``table``."""

    async def waiting() -> bool:
        return bool(
            await conn.fetchval(
                """SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                   WHERE c.relname = $1 AND NOT l.granted""",
                table,
            )
        )

    await await_until_async(waiting, f"a session to wait on {table}", timeout=20)


async def locked_in_transaction(
    conn: asyncpg.Connection, statement: str, *args: object
) -> set[str]:
    """The live job tables ``statement`` locks, run in a transaction then rolled back."""
    tx = conn.transaction()
    await tx.start()
    try:
        await conn.fetch(statement, *args)
        rows = await conn.fetch(
            """SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
               WHERE l.pid = pg_backend_pid() AND c.relname LIKE 'skiplock_jobs_live%'"""
        )
        return {r["relname"] for r in rows}
    finally:
        await tx.rollback()


async def test_a_job_in_a_generation_made_after_the_claims_read_their_sight_is_claimed_at_once(
    own_db: str,
) -> None:
    """A backend's claims read the generations in sight once, then the rotation moves the
    pointer twice, to a generation that did not exist then, and a job goes there: the next
    claim names the old set, finds the pointer outside it, reads the set again and claims the
    job in the same call (without that, it came back empty and a worker slept a poll)."""
    async with migrated_own(own_db) as (schema, backend, conn):
        assert await backend.job_get_available(claim_params()) == []  # the sight is read
        before = await current_segment(conn, schema)
        for _ in range(3):
            assert (await backend.rotate_live(0)) is not None
        after = await current_segment(conn, schema)
        assert after != before
        named = backend._sight.segments  # type: ignore[attr-defined]
        assert after not in named, (named, after)  # made after the sight was read
        (job_id,) = await backend.job_insert_many(JobInsertManyParams([job()]))
        segment = await conn.fetchval(
            f'SELECT segment FROM "{schema}".skiplock_jobs WHERE id = $1', job_id
        )
        assert segment == after
        claimed = await backend.job_get_available(claim_params())
        assert [c.id for c in claimed] == [job_id]
        assert after in backend._sight.segments  # type: ignore[attr-defined]
