"""SQLite's history apart (migration 11, sqlite_history.py): finished jobs move to a table per
UTC day in their completion's transaction, ``skiplock_jobs`` is the view of every table, whole
days past the retention are dropped, a retry brings a job back, ids are never reused, and an
upgrade from version 10 keeps every job and key."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import skiplock
from skiplock import JobState, Worker
from skiplock._backends.params import JobPruneParams
from skiplock._backends.sqlite.storage import history
from skiplock._config import WorkerConfig
from skiplock._worker.services import Pruner
from skiplock.errors import DuplicateJob

from ..helpers import SQLITE_UNDO_KEYS, FakeClock, migrations_from
from .helpers import assert_upgraded_jobs_hold

DAY = 86400.0


def path_of(url: str) -> str:
    return url.removeprefix("sqlite:///")


def where(url: str, job_id: int) -> str | None:
    """The table holding job ``job_id`` (None: no table does)."""
    conn = sqlite3.connect(path_of(url))
    try:
        tables = [history.LIVE] + [name for _, name in history.days(conn)]
        for table in tables:
            if conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (job_id,)).fetchone():
                return table
        return None
    finally:
        conn.close()


def tables(url: str) -> list[str]:
    conn = sqlite3.connect(path_of(url))
    try:
        return [name for _, name in history.days(conn)]
    finally:
        conn.close()


@contextlib.asynccontextmanager
async def clocked(url: str, start: datetime) -> AsyncIterator[tuple[skiplock.App, FakeClock, Any]]:
    """A migrated app on ``url`` whose clock starts at ``start``, and its no-op task."""
    clock = FakeClock(start)
    app = skiplock.App(url, clock=clock)
    await app.migrate()

    @app.task(name="t")
    def t() -> None:
        pass

    try:
        yield app, clock, t
    finally:
        await app.close()


@contextlib.asynccontextmanager
async def recording(url: str) -> AsyncIterator[tuple[skiplock.App, list[int], Any]]:
    """A migrated app on ``url`` and its task ``t(n)``, which records each ``n`` it runs."""
    app = skiplock.App(url)
    await app.migrate()
    calls: list[int] = []

    @app.task(name="t")
    def t(n: int) -> None:
        calls.append(n)

    try:
        yield app, calls, t
    finally:
        await app.close()


async def drain(app: skiplock.App) -> None:
    await asyncio.wait_for(Worker(app, poll_interval_s=0.05, scheduler=False).run(burst=True), 60)


async def test_a_finished_job_moves_to_its_days_table_and_reads_as_before(
    sqlite_url: str,
) -> None:
    """Succeeded and failed-for-good jobs, a kept key, a person's cancel: the succeeded job
    without a kept key leaves the live table for today's; the kept key's holder, the dead job
    and the cancelled one stay live (the view shows them all, with their results)."""
    app = skiplock.App(sqlite_url)
    await app.migrate()
    try:

        @app.task(name="ok")
        def ok(x: int) -> int:
            return x * 2

        @app.task(name="bad", max_attempts=1)
        def bad() -> None:
            raise ValueError("boom")

        done = await ok.aenqueue(21)
        kept = await ok.using(unique_key="k", unique_while="live_or_succeeded").aenqueue(1)
        dead = await bad.aenqueue()
        cancelled = await ok.using(run_after=timedelta(hours=1)).aenqueue(3)
        await app.cancel_job(cancelled.id)
        await drain(app)
        today = history.day_name(datetime.now(UTC).date())
        assert where(sqlite_url, done.id) == today
        assert where(sqlite_url, kept.id) == history.LIVE  # the unique index holds its key
        assert where(sqlite_url, dead.id) == history.LIVE
        assert where(sqlite_url, cancelled.id) == history.LIVE
        assert (await app.get_job(done.id)).result == 42
        assert (await app.get_job(dead.id)).errors[-1]["message"] == "ValueError: boom"
        assert await app.counts() == {
            "pending": 0,
            "running": 0,
            "claimed": 0,
            "succeeded": 2,
            "cancelled": 1,
            "dead": 1,
            "waiting": 0,
        }
        listed = await app.list_jobs()
        assert [j.id for j in listed] == sorted([done.id, kept.id, dead.id, cancelled.id])[::-1]
        # the kept key still refuses a second job, from the live table
        again = await ok.using(unique_key="k", unique_while="live_or_succeeded").aenqueue(1)
        assert again.id == kept.id
        conn = sqlite3.connect(path_of(sqlite_url))
        try:
            rows = conn.execute("SELECT id, state FROM skiplock_jobs ORDER BY id").fetchall()
        finally:
            conn.close()
        assert [r[0] for r in rows] == sorted([done.id, kept.id, dead.id, cancelled.id])
    finally:
        await app.close()


async def test_a_finish_after_midnight_makes_the_new_days_table(sqlite_url: str) -> None:
    """Jobs finished on two days land in two tables; the view reads both."""
    async with clocked(sqlite_url, datetime(2026, 3, 1, 23, 59, 59, tzinfo=UTC)) as (
        app,
        clock,
        t,
    ):
        first = await t.aenqueue()
        await drain(app)
        clock.advance(2.0)
        second = await t.aenqueue()
        await drain(app)
        assert where(sqlite_url, first.id) == "skiplock_jobs_done_p20260301"
        assert where(sqlite_url, second.id) == "skiplock_jobs_done_p20260302"
        assert tables(sqlite_url) == [
            "skiplock_jobs_done_p20260301",
            "skiplock_jobs_done_p20260302",
        ]
        assert (await app.counts())["succeeded"] == 2


async def test_ids_are_never_reused_once_every_job_left_the_live_table(sqlite_url: str) -> None:
    """The AUTOINCREMENT counter stays with the live table: with every job moved to history,
    and even with that history dropped, a new job's id is above every id ever handed out."""
    async with clocked(sqlite_url, datetime(2026, 3, 1, 12, tzinfo=UTC)) as (app, clock, t):
        handles = [await t.aenqueue() for _ in range(5)]
        await drain(app)
        assert all(where(sqlite_url, h.id) != history.LIVE for h in handles)
        newest = max(h.id for h in handles)
        assert (await t.aenqueue()).id == newest + 1
        await drain(app)
        clock.advance(10 * DAY)
        assert await app.prune(finished_age_s=7 * DAY, dead_age_s=30 * DAY) == 6
        assert tables(sqlite_url) == []
        assert (await t.aenqueue()).id == newest + 2


async def test_a_retry_brings_a_job_back_from_history_unless_its_key_is_taken(
    sqlite_url: str,
) -> None:
    async with recording(sqlite_url) as (app, calls, t):
        plain = await t.aenqueue(1)
        keyed = await t.using(unique_key="k").aenqueue(2)
        await drain(app)
        assert where(sqlite_url, plain.id) != history.LIVE
        assert where(sqlite_url, keyed.id) != history.LIVE
        taker = await t.using(unique_key="k", run_after=timedelta(hours=1)).aenqueue(3)
        assert taker.id != keyed.id
        with pytest.raises(DuplicateJob, match="unique key"):
            await app.retry_job(keyed.id)
        assert where(sqlite_url, keyed.id) != history.LIVE  # the refused retry moved nothing
        assert (await app.get_job(keyed.id)).state == JobState.SUCCEEDED
        assert await app.retry_job(plain.id)
        assert where(sqlite_url, plain.id) == history.LIVE
        assert (await app.get_job(plain.id)).state == JobState.PENDING
        await drain(app)
        assert sorted(calls[:2]) == [1, 2] and calls[2:] == [1]  # the first two ran together
        assert where(sqlite_url, plain.id) != history.LIVE


def fill_day(url: str, day: datetime, rows: int) -> str:
    """The day table of ``day`` holding ``rows`` succeeded jobs, written directly."""
    conn = sqlite3.connect(path_of(url), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        name = history.ensure_day(conn, day.date())
        at = day.timestamp() + 3600
        conn.executemany(
            f"INSERT INTO {name} (queue, task, args, kwargs, state, priority, attempt,"
            " max_attempts, run_at, created_at, finished_at, errors, audit, reclaims,"
            " cancel_requested, unique_succeeded)"
            " VALUES ('default', 'old', '[]', '{}', 'succeeded', 0, 1, 3, ?, ?, ?, '[]', '[]',"
            " 0, 0, 0)",
            [(at, at, at + i) for i in range(rows)],
        )
        conn.execute("COMMIT")
        return name
    finally:
        conn.close()


async def test_prune_drops_whole_days_deletes_the_straddling_one_and_counts_exactly(
    sqlite_url: str,
) -> None:
    """Three days of history, the cut-off inside the last: the two whole days go by DROP,
    the third loses only its rows before the cut-off, the count equals the preview's, and a
    reader holding the oldest day open keeps its snapshot without holding the prune up."""
    start = datetime(2026, 3, 1, tzinfo=UTC)
    app = skiplock.App(sqlite_url, clock=FakeClock(start + timedelta(days=20)))
    await app.migrate()
    try:
        oldest = fill_day(sqlite_url, start, 300)
        second = fill_day(sqlite_url, start + timedelta(days=1), 200)
        third = fill_day(sqlite_url, start + timedelta(days=2), 100)
        # 20 days on: a retention of 18 days minus 1 hour and 50 s cuts the third day at
        # its 01:00:50, after its first 50 rows (finished 01:00:00 + i seconds)
        keep = 18 * DAY - 3600 - 50
        preview = await app.prune_preview(finished_age_s=keep, dead_age_s=30 * DAY)
        assert preview == {"succeeded": 550}
        reader = sqlite3.connect(path_of(sqlite_url), isolation_level=None)
        reader.execute("BEGIN")
        assert reader.execute(f"SELECT count(*) FROM {oldest}").fetchone()[0] == 300
        # one whole day a call (the drop holds the file's write lock throughout)
        backend = await app.backend()
        assert await backend.job_prune(JobPruneParams(keep, 30 * DAY, 30)) == 300
        assert tables(sqlite_url) == [second, third]
        assert await app.prune(finished_age_s=keep, dead_age_s=30 * DAY, batch=30) == 250
        assert reader.execute(f"SELECT count(*) FROM {oldest}").fetchone()[0] == 300
        reader.execute("COMMIT")
        reader.close()
        assert tables(sqlite_url) == [third]
        assert second not in tables(sqlite_url)
        assert (await app.counts())["succeeded"] == 50
        assert await app.prune(finished_age_s=keep, dead_age_s=30 * DAY) == 0
    finally:
        await app.close()


async def test_one_pruner_tick_drops_every_expired_day_however_small(sqlite_url: str) -> None:
    """Days smaller than a batch, one dropped a call: the worker's pruner keeps calling
    until a call removes nothing, so one tick clears every expired day (it stopped after the
    first short call, leaving a day a tick: a minute each at the default interval)."""
    start = datetime(2026, 3, 1, tzinfo=UTC)
    app = skiplock.App(sqlite_url, clock=FakeClock(start + timedelta(days=20)))
    await app.migrate()
    try:
        days = [fill_day(sqlite_url, start + timedelta(days=d), 5 + d) for d in range(4)]
        kept = fill_day(sqlite_url, start + timedelta(days=19), 7)
        assert tables(sqlite_url) == [*days, kept]
        config = WorkerConfig(retention_finished_s=7 * DAY)
        assert await Pruner(await app.backend(), config).prune_once() == 5 + 6 + 7 + 8
        assert tables(sqlite_url)[0] == kept  # then today's, the pruner's upkeep made
        assert (await app.counts())["succeeded"] == 7
    finally:
        await app.close()


async def test_a_prune_during_a_drain_runs_every_job_once(sqlite_url: str) -> None:
    """History dropped and deleted while a worker finishes jobs into today's table: every
    job runs once and is kept, every old row goes."""
    now = datetime.now(UTC)
    app = skiplock.App(sqlite_url)
    await app.migrate()
    fill_day(sqlite_url, now - timedelta(days=12), 3000)
    fill_day(sqlite_url, now - timedelta(days=11), 3000)
    seen: list[int] = []
    try:

        @app.task(name="t")
        def t(n: int) -> None:
            seen.append(n)

        await app.enqueue_many(t.prepare(n) for n in range(2000))
        worker = asyncio.create_task(
            Worker(app, concurrency=20, poll_interval_s=0.01, scheduler=False).run(burst=True)
        )
        removed = await app.prune(finished_age_s=7 * DAY, dead_age_s=30 * DAY, batch=500)
        await asyncio.wait_for(worker, 60)
        assert removed == 6000
        assert sorted(seen) == list(range(2000))
        assert await app.counts() == {
            "pending": 0,
            "running": 0,
            "claimed": 0,
            "succeeded": 2000,
            "cancelled": 0,
            "dead": 0,
            "waiting": 0,
        }
    finally:
        await app.close()


def version_10(url: str) -> None:
    """Turn a migrated file back into version 10's shape (one table, no view)."""
    conn = sqlite3.connect(path_of(url), isolation_level=None)
    try:
        conn.execute("DROP VIEW skiplock_jobs")
        for statement in SQLITE_UNDO_KEYS:
            conn.execute(statement)
        conn.executescript(
            """ALTER TABLE skiplock_jobs_live RENAME TO skiplock_jobs;
               DELETE FROM skiplock_migrations WHERE version >= 11;"""
        )
    finally:
        conn.close()


VERSION_10_ROWS = """
INSERT INTO skiplock_jobs (queue, task, state, max_attempts, attempt, unique_key,
                           unique_succeeded, locked_by, lease_token, lease_expires_at, result,
                           errors, run_at, created_at, finished_at)
VALUES ('default', 'a', 'pending', 3, 0, 'k-pending', 0, NULL, NULL, NULL, NULL, '[]',
        :now, :now, NULL),
       ('default', 'b', 'running', 3, 1, 'k-running', 0, 'w', 'w:1', :now + 3600, NULL, '[]',
        :now, :now, NULL),
       ('default', 'c', 'succeeded', 3, 1, 'k-kept', 1, 'w', NULL, NULL, '{"x": 1}', '[]',
        :now, :now, :now - 3600),
       ('default', 'd', 'succeeded', 3, 1, 'k-free', 0, 'w', NULL, NULL, '2', '[]',
        :now, :now, :now - 2 * 86400),
       ('other', 'e', 'cancelled', 3, 0, NULL, 0, NULL, NULL, NULL, NULL, '[]',
        :now, :now, :now - 10 * 86400),
       ('default', 'f', 'dead', 3, 3, 'k-dead', 0, 'w', NULL, NULL, NULL,
        '[{"message": "boom"}]', :now, :now, :now - 86400)
"""


async def test_an_upgrade_from_version_10_keeps_every_job_result_and_key(
    sqlite_url: str,
) -> None:
    """A version 10 file with a job in every state upgrades in place: the same rows through
    ``skiplock_jobs`` (now a view), the keys still held are held, new ids follow the old
    ones, and the finished rows it found stay live until their retention prunes them."""
    app = skiplock.App(sqlite_url)
    await app.migrate()
    await app.close()
    version_10(sqlite_url)
    conn = sqlite3.connect(path_of(sqlite_url), isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        conn.execute(VERSION_10_ROWS, {"now": datetime.now(UTC).timestamp()})
        before = [dict(r) for r in conn.execute("SELECT * FROM skiplock_jobs ORDER BY id")]
        app = skiplock.App(sqlite_url)
        assert await app.migrate() == migrations_from(sqlite_url, 11)
        kinds = conn.execute(
            "SELECT type FROM sqlite_master WHERE name = 'skiplock_jobs'"
        ).fetchone()
        assert kinds[0] == "view"
        after = [dict(r) for r in conn.execute("SELECT * FROM skiplock_jobs ORDER BY id")]
        # migration 12's, 13's and 24's columns: no job of before has a concurrency key or a
        # window, nor is parked
        added = ("concurrency_key", "key_limit", "key_order", "unique_until", "key_weight")
        added += ("parked",)
        keys = {tuple(r.pop(name) for name in added) for r in after}
        assert keys == {(None,) * len(added)}
        assert {r.pop("lane") for r in after} == {"default"}  # version 28's
        # migration 18's: each key of before is its task's own
        scopes = [r.pop("unique_scope") for r in after]
        assert scopes == [r["task"] if r["unique_key"] else None for r in before]
        assert after == before
        ids = [row["id"] for row in before]
        assert all(where(sqlite_url, i) == history.LIVE for i in ids)
        await assert_upgraded_jobs_hold(app, ids)
        assert await app.prune(finished_age_s=7 * DAY, dead_age_s=30 * DAY) == 1  # 'e'
        assert where(sqlite_url, ids[4]) is None
        await app.close()
    finally:
        conn.close()


async def test_your_own_sql_writes_through_the_view_as_it_wrote_the_table(
    sqlite_url: str,
) -> None:
    """``skiplock_jobs`` is a view, but SQL that wrote the table still works: an insert (its
    missing columns defaulted) becomes a live job a worker runs; an update reaches a job in a
    day table, and one that makes it pending again, or moves its finish out of the table's
    day, brings it back to the live table (so claims see it, and the prune removes what its
    preview counts); a delete removes a job wherever it is."""
    async with recording(sqlite_url) as (app, calls, t):
        again, aged, gone = await t.aenqueue(1), await t.aenqueue(2), await t.aenqueue(3)
        await drain(app)
        assert {where(sqlite_url, h.id) for h in (again, aged, gone)} != {history.LIVE}
        conn = sqlite3.connect(path_of(sqlite_url), isolation_level=None)
        try:
            conn.execute(
                "INSERT INTO skiplock_jobs (queue, task, args, max_attempts, run_at, created_at)"
                " VALUES ('default', 't', '[4]', 3, 0, 0)"
            )
            conn.execute("UPDATE skiplock_jobs SET priority = 7 WHERE id = ?", (gone.id,))
            assert where(sqlite_url, gone.id) != history.LIVE  # still its day's
            conn.execute("UPDATE skiplock_jobs SET finished_at = 5 WHERE id = ?", (aged.id,))
            conn.execute("DELETE FROM skiplock_jobs WHERE id = ?", (gone.id,))
            conn.execute(
                "UPDATE skiplock_jobs SET state = 'pending', attempt = 0, finished_at = NULL,"
                " run_at = 0 WHERE id = ?",
                (again.id,),
            )
        finally:
            conn.close()
        assert where(sqlite_url, gone.id) is None
        assert where(sqlite_url, aged.id) == history.LIVE
        assert where(sqlite_url, again.id) == history.LIVE
        assert await app.prune_preview(finished_age_s=DAY, dead_age_s=DAY) == {"succeeded": 1}
        assert await app.prune(finished_age_s=DAY, dead_age_s=DAY) == 1
        assert where(sqlite_url, aged.id) is None
        await drain(app)
        assert sorted(calls) == [1, 1, 2, 3, 4]
        assert (await app.counts())["succeeded"] == 2  # again and the inserted one


async def test_past_the_most_day_tables_finishes_stay_in_the_live_table(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's view can union at most 500 tables: with MAX_DAYS tables there (a retention
    of more days than that), a new day's finishes stay in the live table, still read and
    pruned like every finished job."""
    monkeypatch.setattr(history, "MAX_DAYS", 1)
    async with clocked(sqlite_url, datetime(2026, 3, 1, 12, tzinfo=UTC)) as (app, clock, t):
        first = await t.aenqueue()
        await drain(app)
        clock.advance(DAY)
        second = await t.aenqueue()
        await drain(app)
        assert where(sqlite_url, first.id) == "skiplock_jobs_done_p20260301"
        assert where(sqlite_url, second.id) == history.LIVE
        assert tables(sqlite_url) == ["skiplock_jobs_done_p20260301"]
        assert (await app.get_job(second.id)).state == JobState.SUCCEEDED
        clock.advance(10 * DAY)
        assert await app.prune(finished_age_s=7 * DAY, dead_age_s=30 * DAY) == 2
