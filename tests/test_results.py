"""Return values: stored on the job row as strict JSON, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import asyncpg
import pytest

import skiplock
from skiplock import JobState, Worker

from .conftest import PG_URL
from .helpers import SQLITE_UNDO_KEYS, migrations_from, pg_schema_at


async def burst(app: skiplock.App) -> Worker:
    worker = Worker(app, poll_interval_s=0.05)
    await asyncio.wait_for(worker.run(burst=True), timeout=60)
    return worker


async def test_async_and_sync_results_are_stored(app: skiplock.App) -> None:
    @app.task(name="a")
    async def a(x: int) -> dict[str, object]:
        return {"double": 2 * x, "list": [1, "two", None]}

    @app.task(name="s")
    def s(x: int) -> str:
        return f"s{x}"

    @app.task(name="n")
    def n() -> None:
        return None

    ha, hs, hn = await a.aenqueue(21), await s.aenqueue(3), await n.aenqueue()
    await burst(app)
    ra, rs, rn = await ha.fetch(), await hs.fetch(), await hn.fetch()
    assert ra.result == {"double": 42, "list": [1, "two", None]}
    assert rs.result == "s3"
    assert rn.result is None and rn.state == JobState.SUCCEEDED
    assert ra.started_at is not None and ra.finished_at is not None
    assert ra.worker is not None and ra.worker == ra.locked_by


async def test_keep_result_false_stores_nothing(app: skiplock.App) -> None:
    @app.task(name="hot", keep_result=False)
    def hot() -> int:
        return 7

    handle = await hot.aenqueue()
    await burst(app)
    record = await handle.fetch()
    assert record.state == JobState.SUCCEEDED and record.result is None


def test_keep_result_must_be_a_bool() -> None:
    app = skiplock.App("sqlite:///unused.db")
    with pytest.raises(skiplock.ConfigurationError, match="keep_result"):
        app.task(name="x", keep_result="yes")(lambda: None)  # type: ignore[call-overload]


def test_max_result_bytes_must_be_positive() -> None:
    with pytest.raises(skiplock.ConfigurationError, match="max_result_bytes"):
        skiplock.App("sqlite:///unused.db", max_result_bytes=0)


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (datetime(2026, 1, 1, tzinfo=UTC), "datetime"),
        ({1, 2}, "set"),
        ("x" * (1024 * 1024), "str"),
        ({"nan": float("nan")}, "dict"),
        ({1: "a"}, "object key 1"),
    ],
    ids=["datetime", "set", "1MiB", "nan", "int-key"],
)
async def test_a_result_that_cannot_be_stored_kills_the_job_not_the_worker(
    app: skiplock.App, value: object, named: str
) -> None:
    @app.task(name="bad", max_attempts=5)
    def bad() -> object:
        return value

    @app.task(name="fine")
    def fine() -> int:
        return 1

    hb, hf = await bad.aenqueue(), await fine.aenqueue()
    await burst(app)
    record = await hb.fetch()
    assert record.state == JobState.DEAD
    assert record.attempt == 1  # permanent: no retry would return anything else
    message = record.errors[-1]["message"]
    assert "'bad'" in message and named in message, message
    assert record.result is None
    assert (await hf.fetch()).result == 1


async def test_result_size_limit_is_the_apps(db_url: str) -> None:
    app = skiplock.App(db_url, max_result_bytes=10)
    await app.migrate()
    try:

        @app.task(name="big")
        def big() -> str:
            return "y" * 20

        handle = await big.aenqueue()
        await burst(app)
        record = await handle.fetch()
        assert record.state == JobState.DEAD
        assert "max_result_bytes" in record.errors[-1]["message"]
    finally:
        await app.close()


async def test_a_retried_attempt_keeps_no_result(app: skiplock.App) -> None:
    calls = 0

    @app.task(name="flaky", retry=skiplock.RetryPolicy(base_s=0.001, cap_s=0.001))
    def flaky() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("first")
        return calls

    handle = await flaky.aenqueue()
    worker = Worker(app, poll_interval_s=0.01)
    await asyncio.wait_for(worker.run(burst=True), timeout=60)
    while (await handle.fetch()).state != JobState.SUCCEEDED:
        await asyncio.wait_for(Worker(app, poll_interval_s=0.01).run(burst=True), timeout=60)
    assert (await handle.fetch()).result == 2


def _downgrade_to_version_5(db_url: str) -> None:
    """Make a migrated SQLite file what the previous release left: no result or progress
    (PostgreSQL's version 5 is built from its migrations instead: pg_schema_at)."""
    statements = [
        "DROP VIEW {t}",  # migration 11 (the history apart)
        *SQLITE_UNDO_KEYS,  # migration 12
        "ALTER TABLE skiplock_jobs_live RENAME TO {t}",
        "ALTER TABLE {t} DROP COLUMN result",
        "ALTER TABLE {t} DROP COLUMN progress",
        "DROP INDEX {i}",  # migrations 7 and 8 (health numbers, trace context) undone too
        "ALTER TABLE {t} DROP COLUMN ready_at",
        "ALTER TABLE {t} DROP COLUMN run_s",
        "ALTER TABLE {t} DROP COLUMN reclaims",
        "ALTER TABLE {t} DROP COLUMN reclaimed_at",
        "ALTER TABLE {t} DROP COLUMN trace_context",
        "ALTER TABLE {t} DROP COLUMN payload_version",  # migration 9
        "DROP TABLE {w}",
        "DROP TABLE {a}",  # migration 10 (the audit trail)
        "DELETE FROM {m} WHERE version >= 6",
    ]
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        for s in statements:
            names = {"t": "skiplock_jobs", "m": "skiplock_migrations"}
            names |= {"i": "skiplock_jobs_reclaimed_idx", "w": "skiplock_workers"}
            names |= {"a": "skiplock_audit"}
            conn.execute(s.format(**names))
    finally:
        conn.close()


async def test_a_populated_version_5_database_upgrades_and_runs_its_jobs(db_url: str) -> None:
    app = skiplock.App(db_url)

    @app.task(name="old")
    def old(x: int) -> int:
        return x + 1

    if db_url.startswith("sqlite"):
        await app.migrate()
        ids = [h.id for h in await app.enqueue_many(old.prepare(i) for i in range(5))]
        _downgrade_to_version_5(db_url)
    else:  # the tables migration 5 left (the later ones partition the job table)
        await pg_schema_at(db_url, 5)
        schema = parse_qs(urlsplit(db_url).query)["schema"][0]
        pg = await asyncpg.connect(PG_URL)
        try:
            ids = [
                await pg.fetchval(
                    f"""INSERT INTO "{schema}".skiplock_jobs (queue, task, args, max_attempts)
                        VALUES ('default', 'old', $1::jsonb, 3) RETURNING id""",
                    f"[{i}]",
                )
                for i in range(5)
            ]
        finally:
            await pg.close()
    await app.close()
    app = skiplock.App(db_url)
    app.tasks["old"] = dataclasses.replace(old, app=app)
    try:
        with pytest.raises(skiplock.SchemaError, match="skiplock migrate"):
            await app.check_schema()
        assert await app.migrate() == migrations_from(db_url, 6)
        await burst(app)
        records = [await app.get_job(i) for i in ids]
        assert [r.result for r in records] == [1, 2, 3, 4, 5]
    finally:
        await app.close()


async def test_a_requeued_job_does_not_keep_its_earlier_result_or_progress(
    app: skiplock.App,
) -> None:
    """A person requeues a succeeded job; its next run returns None: no stale value."""
    runs = 0

    @app.task(name="once")
    async def once() -> str | None:
        nonlocal runs
        runs += 1
        if runs == 1:
            await skiplock.current_job().set_progress(1.0, "first run")
            return "first"
        return None

    handle = await once.aenqueue()
    await burst(app)
    first = await handle.fetch()
    assert first.result == "first" and first.progress is not None
    assert await app.retry_job(handle.id)
    assert (await handle.fetch()).progress is None
    await burst(app)
    again = await handle.fetch()
    assert again.state == JobState.SUCCEEDED and runs == 2
    assert again.result is None and again.progress is None
