"""skiplock behind a real PgBouncer in transaction pooling mode (``?pooler=transaction``).

Workers (real CLI processes) and producers go through the pooler; LISTEN goes to the server
directly (``listen_url``), or nowhere (poll-only). Every job must run exactly once.
"""

from __future__ import annotations

import asyncio
import collections
import statistics
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

import skiplock
from skiplock import Worker
from skiplock._backends.postgres import PostgresBackend
from skiplock._backends.postgres.storage import partitions as postgres_storage
from skiplock._backends.postgres.storage import rotation as postgres_rotation
from skiplock._url import mask_url
from skiplock.errors import ConfigurationError

from .apps import pooler_app
from .backends.helpers import seed_every_state
from .helpers import Cli, turn_of
from .pgbouncer import pgbouncer

APP = "tests.apps.pooler_app:app"


@pytest.fixture(scope="module")
def bouncer() -> Iterator[str]:
    with pgbouncer() as url:
        yield url


@pytest.fixture
def pooled_url(bouncer: str, pg_url: str) -> str:
    """The test's schema through the pooler, LISTEN on the server directly."""
    schema = pg_url.rsplit("schema=", 1)[1]
    direct = pg_url.split("?", 1)[0]
    return f"{bouncer}?schema={schema}&pooler=transaction&listen_url={direct}"


def poll_only(url: str) -> str:
    return url.split("&listen_url=", 1)[0]


@pytest.fixture
async def app(pooled_url: str) -> AsyncIterator[skiplock.App]:
    the_app = skiplock.App(pooled_url)
    await the_app.migrate()  # through the pooler too
    yield the_app
    await the_app.close()


def test_url_options_are_split_off_and_checked() -> None:
    base = "postgresql://u@h:6432/db?schema=s&sslmode=require"
    direct = PostgresBackend(base)
    assert not direct.pooled and direct.supports_push
    pooled = PostgresBackend(f"{base}&pooler=transaction")
    assert pooled.pooled and not pooled.supports_push  # poll-only: no direct connection
    listening = PostgresBackend(f"{base}&pooler=transaction&listen_url=postgresql://u@h:5432/db")
    assert listening.supports_push
    assert "pooler" not in listening._dsn and "listen_url" not in listening._dsn
    assert "sslmode=require" in listening._dsn
    with pytest.raises(ConfigurationError, match="pooler='session'"):
        PostgresBackend(f"{base}&pooler=session")
    with pytest.raises(ConfigurationError, match="listen_url"):
        PostgresBackend(f"{base}&pooler=transaction&listen_url=mysql://h/db")
    both = "postgresql://u:one@h/db?pooler=transaction&listen_url=postgresql://u:two@h2/db"
    assert "one" not in mask_url(both) and "two" not in mask_url(both)


async def test_enqueue_and_drain_in_process_through_the_pooler(app: skiplock.App) -> None:
    ran: collections.Counter[int] = collections.Counter()

    @app.task(name="count")
    async def count(n: int) -> None:
        ran[n] += 1

    await app.enqueue_many(count.prepare(n) for n in range(300))  # COPY through the pooler
    await asyncio.gather(*(count.aenqueue(n) for n in range(300, 340)))
    first = await count.using(unique_key="once").aenqueue(340)
    assert (await count.using(unique_key="once").aenqueue(341)).id == first.id  # deduplicated
    with pytest.raises(skiplock.DuplicateJob):
        await count.using(unique_key="once", on_duplicate="raise").aenqueue(342)
    workers = [Worker(app, concurrency=20, poll_interval_s=0.05) for _ in range(3)]
    await asyncio.wait_for(asyncio.gather(*(w.run(burst=True) for w in workers)), 60)
    assert sorted(ran) == list(range(341)) and set(ran.values()) == {1}
    assert (await app.counts())["succeeded"] == 341


async def test_the_storage_upkeep_and_the_hot_vacuum_run_through_the_pooler(
    app: skiplock.App, pg_url: str
) -> None:
    """The pruner's partition upkeep (a transaction-level advisory lock, SET LOCAL), the
    vacuumer's VACUUM (one statement outside a transaction) and the rotator's move and
    detach work in transaction pooling."""
    schema = pg_url.rsplit("schema=", 1)[1]
    day = datetime.now(UTC).date() + timedelta(days=postgres_storage.DAYS_AHEAD)
    name = postgres_storage.day_name(day)
    direct = await asyncpg.connect(pg_url.split("?", 1)[0])
    try:
        await direct.execute(f'DROP TABLE "{schema}".{name}')
        backend = await app.backend()
        assert await backend.storage_upkeep() == [name]
        table = f'"{schema}".skiplock_jobs_live_long'
        stats = "SELECT vacuum_count FROM pg_stat_all_tables WHERE relid = to_regclass($1)"
        assert await direct.fetchval(stats, table) == 0
        done = await backend.hot_vacuum(0)  # a threshold of none: it vacuums
        assert done is not None and (done.removed, done.kept) == (0, 0), done  # its report too
        assert await direct.fetchval(stats, table) == 1
        # the rotation: advisory locks and SET LOCAL in transactions, the pointer's setval, and
        # DETACH PARTITION ... CONCURRENTLY (outside a transaction block, cancelled at its wait
        # when a session holds the table)
        segment = await direct.fetchval(postgres_rotation.pointer_sql(f'"{schema}"'))
        await direct.execute(
            f"""INSERT INTO "{schema}".skiplock_jobs (queue, task, max_attempts)
                VALUES ('default', 'left', 3)"""
        )
        rotation = await turn_of(backend, segment)
        assert rotation is not None and (rotation.moved, rotation.detached) == (1, True)
    finally:
        await direct.close()


async def test_a_reader_leaves_a_detach_pending_through_the_pooler(
    app: skiplock.App, pg_url: str
) -> None:
    """Behind transaction pooling, a detach waiting for a reader is interrupted by a cancel
    request (PgBouncer forwards it to the session running it): the generation is left pending
    out of sight, and the pooled session serves the next statements."""
    schema = pg_url.rsplit("schema=", 1)[1]
    direct = await asyncpg.connect(pg_url.split("?", 1)[0])
    reader = await asyncpg.connect(pg_url.split("?", 1)[0])
    try:
        backend = await app.backend()
        segment = await direct.fetchval(postgres_rotation.pointer_sql(f'"{schema}"'))
        await reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await reader.fetchval(f'SELECT count(*) FROM "{schema}".skiplock_jobs')
        rotation = await turn_of(backend, segment)
        assert rotation.detached and any(
            n.endswith(postgres_rotation.segment_name(segment)) for n in rotation.held_on
        )
        pending = await direct.fetchval(
            "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = to_regclass($1)",
            f'"{schema}".{postgres_rotation.segment_name(segment)}',
        )
        assert pending is True
        assert await app.counts() is not None  # the pooled sessions serve on
        await reader.execute("COMMIT")
        # its finish waits for every older transaction in the database, the suite's other
        # tests' included: that it is finished and dropped is tests/backends/test_storage.py's
        done = await backend.rotate_live(1 << 30)
        assert done is not None and not done.held, done
    finally:
        await reader.close()
        await direct.close()


@pytest.fixture
def cli(pooled_url: str, tmp_path: Path) -> Iterator[Cli]:
    runner = Cli(pooled_url, tmp_path, APP)
    yield runner
    runner.stop_all()


def executions(cli: Cli) -> dict[int, list[float]]:
    runs: dict[int, list[float]] = collections.defaultdict(list)
    for line in cli.lines():
        n, _job, at = line.split()
        runs[int(n)].append(float(at))
    return runs


async def wait_for_runs(cli: Cli, total: int, timeout: float) -> dict[int, list[float]]:
    deadline = time.monotonic() + timeout
    while len(runs := executions(cli)) < total:
        assert time.monotonic() < deadline, f"only {len(runs)} of {total} jobs ran"
        await asyncio.sleep(0.1)
    return runs


@pytest.mark.slow
async def test_cli_workers_and_producers_drain_exactly_once(
    app: skiplock.App, cli: Cli, bouncer: str, pooled_url: str
) -> None:
    pooler_app.app.url = pooled_url
    workers = [cli.start("--poll-interval", "30", "--concurrency", "20") for _ in range(2)]

    async def producer(start: int) -> None:
        for n in range(start, start + 100, 10):
            await pooler_app.app.enqueue_many(pooler_app.stamp.prepare(i) for i in range(n, n + 9))
            conn = await asyncpg.connect(bouncer, statement_cache_size=0)
            try:  # the caller's own transaction on a pooled connection
                async with conn.transaction():
                    await pooler_app.stamp.using(connection=conn).aenqueue(n + 9)
            finally:
                await conn.close()

    try:
        await pooler_app.app.backend()  # opened once: concurrent first calls would race
        await asyncio.gather(*(producer(start) for start in range(0, 400, 100)))
        runs = await wait_for_runs(cli, 400, 60)
        # poll interval 30 s: only the NOTIFY through LISTEN on listen_url makes this prompt
        assert sorted(runs) == list(range(400))
        assert all(len(times) == 1 for times in runs.values()), "a job ran twice"
    finally:
        await pooler_app.app.close()
    # one worker may run all 400 before the other has started, and a SIGTERM before a worker
    # takes signals over is the default action, death by the signal (-15): wait for both
    for index in range(len(workers)):
        await asyncio.to_thread(cli.wait_for_output, index, " ready: ")
    for proc in workers:
        proc.terminate()
    assert [await asyncio.to_thread(p.wait, 30) for p in workers] == [0, 0]
    assert (await app.counts())["succeeded"] == 400


@pytest.mark.slow
async def test_poll_only_latency(app: skiplock.App, cli: Cli, pooled_url: str) -> None:
    pooler_app.app.url = cli.url = poll_only(pooled_url)
    poll_s = 0.5
    worker = cli.start("--poll-interval", str(poll_s))
    latencies = []
    try:
        for n in range(10):
            enqueued = time.time()
            await pooler_app.stamp.aenqueue(n)
            (started,) = (await wait_for_runs(cli, n + 1, 30))[n]
            latencies.append(started - enqueued)
    finally:
        await pooler_app.app.close()
    worker.terminate()
    assert await asyncio.to_thread(worker.wait, 30) == 0
    report = (
        f"poll-only latency at poll_interval_s={poll_s}: median "
        f"{statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
    )
    print(report)
    # a poll every poll_s (with jitter) bounds the wait; the margin covers a loaded machine
    assert max(latencies) < poll_s * 2 + 1.0, report


async def test_sqlalchemy_sessions_through_the_pooler(app: skiplock.App, bouncer: str) -> None:
    """The settings README gives for SQLAlchemy's asyncpg dialect behind the pooler."""
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    @app.task(name="noop")
    async def noop(n: int) -> None:
        pass

    engine = create_async_engine(
        bouncer.replace("postgresql:", "postgresql+asyncpg:", 1),
        connect_args={"statement_cache_size": 0, "prepared_statement_cache_size": 0},
    )

    async def business(n: int) -> None:
        async with AsyncSession(engine) as session:
            await noop.using(connection=session).aenqueue(n)
            await session.commit()

    try:
        for _ in range(3):  # sessions reuse pooled server connections across rounds
            await asyncio.gather(*(business(n) for n in range(20)))
    finally:
        await engine.dispose()
    assert (await app.counts())["pending"] == 60


async def test_a_persons_reads_through_the_pooler_agree_with_the_server(
    app: skiplock.App, pg_url: str
) -> None:
    """A person's reads of every state run in two sessions on one exported snapshot
    (``postgres_reads``): through a transaction pooler each is a transaction of its own on
    whichever server session it gets, and the numbers are those read on the server directly."""
    await seed_every_state(app)
    direct = skiplock.App(pg_url)
    try:
        assert await app.counts_by_queue() == await direct.counts_by_queue()
        assert await app.count_jobs_by_state() == await direct.count_jobs_by_state()
        listed = [j.id for j in await app.list_jobs(None, skiplock.JobFilter(limit=50))]
        assert listed == [j.id for j in await direct.list_jobs(None, skiplock.JobFilter(limit=50))]
        ours, theirs = await app.stats(), await direct.stats()
        assert (ours.total.pending, ours.total.completed) == (
            theirs.total.pending,
            theirs.total.completed,
        )
        assert len(await app.list_jobs(skiplock.JobState.DEAD)) == 2
    finally:
        await direct.close()
