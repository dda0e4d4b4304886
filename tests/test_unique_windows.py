"""Unique keys over time (issue 25): ``unique_for`` windows that outlive the job,
``on_conflict`` (keep, replace, reject) and ``debounce``, on both backends, with the pinned
clock moving time instead of sleeps; and concurrent debounced enqueues on PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import asyncpg
import pytest

import skiplock
from skiplock import ConfigurationError, DuplicateJob
from skiplock._backends.params import ClaimParams
from skiplock._job import JobFilter, JobState

from .conftest import PG_URL
from .helpers import SQLITE_UNDO_KEYS, FakeClock, pg_schema_at


def claim(limit: int = 10) -> ClaimParams:
    return ClaimParams(None, limit, "w", "tok", default_lease=60.0, lease_margin=5.0)


async def live_with_key(app: skiplock.App, key: str) -> list[skiplock.JobRecord]:
    jobs = await app.list_jobs(where=JobFilter(limit=100))
    return [j for j in jobs if j.unique_key == key and j.state in JobState.live()]


# -- the options, checked where they are given ---------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"on_conflict": "merge"}, "on_conflict='merge': must be 'keep', 'replace' or 'reject'"),
        ({"unique_for": 60}, "unique_for=60: keeps a unique key taken for a while"),
        ({"unique_key": "k", "unique_for": 0}, "unique_for=0: must be > 0 seconds"),
        ({"unique_key": "k", "unique_for": float("nan")}, "unique_for=nan: must be finite"),
        ({"unique_key": "k", "unique_for": "60"}, "unique_for='60': must be a number"),
        ({"unique_key": "k", "unique_for": timedelta(days=-1)}, "must be > 0 seconds"),
        (
            {"unique_key": "k", "unique_for": 60, "unique_while": "live_or_succeeded"},
            "unique_for=60: bounds how long a succeeded job keeps its key",
        ),
        ({"debounce": -1}, "debounce=-1: must be > 0 seconds"),
        ({"debounce": float("inf")}, "debounce=inf: must be finite"),
        (
            {"debounce": 1, "run_after": timedelta(seconds=5)},
            "debounce=1: runs the job a window after the last enqueue with its arguments: "
            "give it without run_after=",
        ),
        ({"debounce": 1, "on_conflict": "reject"}, "give it without on_conflict='reject'"),
        ({"debounce": 1, "unique_key": "k", "unique_for": 9}, "give it without unique_for=9"),
        ({"unique_key": ""}, "unique_key='': must be a non-empty string"),
        ({"on_conflict": "keep", "on_duplicate": "raise"}, "give one of them"),
    ],
)
async def test_unique_options_are_checked_where_they_are_given(
    app: skiplock.App, options: dict[str, Any], message: str
) -> None:
    @app.task
    async def sync(n: int) -> None: ...

    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sync.using(**options)


async def test_a_unique_key_function_that_raises_fails_the_enqueue(app: skiplock.App) -> None:
    @app.task(unique_key=lambda account: f"sync:{account['id']}")
    async def sync(account: dict[str, int]) -> None: ...

    first = await sync.aenqueue({"id": 1})
    assert (await sync.aenqueue({"id": 1})).id == first.id  # the same key
    assert (await sync.aenqueue({"id": 2})).id != first.id
    with pytest.raises(ConfigurationError, match="unique_key function raised KeyError"):
        await sync.aenqueue({"name": 3})
    assert (await app.counts())["pending"] == 2


# -- unique_for: a window from the enqueue, outliving the job ---------------------------------


async def test_unique_for_keeps_the_key_after_success_until_the_window_passes(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    ran: list[int] = []

    @clocked_app.task(unique_key="digest:7", unique_for=timedelta(minutes=10))
    async def digest(n: int) -> None:
        ran.append(n)

    first = await digest.aenqueue(1)
    assert [o.state for o in await clocked_app.drain()] == [JobState.SUCCEEDED]
    clock.advance(599)
    assert (await digest.aenqueue(2)).id == first.id  # finished, still within its window
    with pytest.raises(DuplicateJob) as refused:
        await digest.using(on_conflict="reject").aenqueue(3)
    assert refused.value.job_id == first.id
    assert (await clocked_app.get_job(first.id)).unique_until is not None
    clock.advance(1)  # the window has passed: the key is free
    second = await digest.aenqueue(4)
    assert second.id != first.id
    assert await clocked_app.drain() and ran == [1, 4]


async def test_a_dead_job_does_not_hold_its_window(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    @clocked_app.task(unique_key="w", unique_for=600, max_attempts=1)
    async def fails() -> None:
        raise RuntimeError("no")

    first = await fails.aenqueue()
    assert [o.state for o in await clocked_app.drain()] == [JobState.DEAD]
    assert (await fails.aenqueue()).id != first.id


async def test_requeueing_a_dead_job_waits_for_a_window_to_pass(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    outcome = {"fail": True}

    @clocked_app.task(max_attempts=1)
    async def job() -> None:
        if outcome["fail"]:
            raise RuntimeError("no")

    dead = await job.using(unique_key="r").aenqueue()
    await clocked_app.drain()
    outcome["fail"] = False
    kept = await job.using(unique_key="r", unique_for=60).aenqueue()
    assert kept.id != dead.id and (await clocked_app.drain())
    with pytest.raises(DuplicateJob):  # the succeeded job keeps the key for its window
        await clocked_app.retry_job(dead.id)
    clock.advance(61)
    assert await clocked_app.retry_job(dead.id)
    assert (await clocked_app.get_job(dead.id)).state is JobState.PENDING
    assert (await job.using(unique_key="r").aenqueue()).id == dead.id  # it holds it now


# -- on_conflict ------------------------------------------------------------------------------


async def test_replace_gives_a_pending_holder_the_last_arguments_and_run_time(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    ran: list[str] = []

    @clocked_app.task(unique_key="profile:9", on_conflict="replace")
    async def refresh(version: str) -> None:
        ran.append(version)

    first = await refresh.using(run_after=timedelta(seconds=30)).aenqueue("a")
    again = await refresh.using(run_after=timedelta(seconds=5)).aenqueue("b")
    assert again.id == first.id
    job = await clocked_app.get_job(first.id)
    assert job.args == ["b"] and job.run_at == clock.now + timedelta(seconds=5)
    clock.advance(5)
    await clocked_app.drain()
    assert ran == ["b"]


async def test_replace_keeps_a_running_holder_and_keep_keeps_a_pending_one(
    clocked_app: skiplock.App,
) -> None:
    @clocked_app.task(unique_key="k")
    async def job(n: int) -> None: ...

    first = await job.aenqueue(1)
    assert (await job.aenqueue(2)).id == first.id  # keep (the default)
    assert (await clocked_app.get_job(first.id)).args == [1]
    backend = await clocked_app.backend()
    assert [c.id for c in await backend.job_get_available(claim())] == [first.id]
    assert (await job.using(on_conflict="replace").aenqueue(3)).id == first.id
    running = await clocked_app.get_job(first.id)
    assert running.state is JobState.RUNNING and running.args == [1]  # it read [1] already


async def test_a_batch_replacing_its_own_key_ends_with_the_last_arguments(
    clocked_app: skiplock.App,
) -> None:
    @clocked_app.task(unique_key="b", on_conflict="replace")
    async def job(n: int) -> None: ...

    handles = await clocked_app.enqueue_many([job.prepare(n) for n in range(5)])
    assert len({h.id for h in handles}) == 1
    assert (await clocked_app.get_job(handles[0].id)).args == [4]


# -- debounce ---------------------------------------------------------------------------------


async def test_debounce_runs_once_with_the_last_arguments_after_the_last_enqueue(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    ran: list[int] = []

    @clocked_app.task(debounce=timedelta(milliseconds=200))
    async def reindex(n: int) -> None:
        ran.append(n)

    handles = []
    for n in range(10):
        handles.append(await reindex.aenqueue(n))
        clock.advance(0.1)  # each within the window of the one before
    assert len({h.id for h in handles}) == 1
    job = await clocked_app.get_job(handles[0].id)
    assert job.unique_key == reindex.name  # the task's name, when no unique_key is given
    assert job.run_at == clock.now - timedelta(seconds=0.1) + timedelta(seconds=0.2)
    assert await clocked_app.drain() == []  # the window of the last enqueue is open
    clock.advance(0.15)  # past it (SQLite keeps times as float seconds: not to the microsecond)
    assert [o.state for o in await clocked_app.drain()] == [JobState.SUCCEEDED]
    assert ran == [9]


async def test_debounce_while_the_job_runs_writes_a_new_job_for_the_new_arguments(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    @clocked_app.task(debounce=1, unique_key=lambda doc, edit=0: f"doc:{doc}")
    async def reindex(doc: int, edit: int = 0) -> None: ...

    first = await reindex.aenqueue(5)
    clock.advance(1)
    backend = await clocked_app.backend()
    assert [c.id for c in await backend.job_get_available(claim())] == [first.id]
    second = await reindex.aenqueue(5, edit=1)
    assert second.id != first.id  # the running job read older arguments
    assert (await clocked_app.get_job(first.id)).unique_key is None  # it gave its key up
    third = await reindex.aenqueue(5, edit=2)
    assert third.id == second.id
    assert [j.id for j in await live_with_key(clocked_app, "doc:5")] == [second.id]
    assert (await clocked_app.get_job(second.id)).kwargs == {"edit": 2}


# -- a holder parked on a signal (wait_for) ---------------------------------------------------


async def test_a_parked_holder_keeps_its_key_as_a_running_one_does(
    clocked_app: skiplock.App,
) -> None:
    """keep hands back the parked job, replace keeps it as it is (it read its arguments),
    reject raises; a cancel of it frees the key."""

    @clocked_app.task(unique_key=lambda order, note="": f"order:{order}")
    async def approve(order: int, note: str = "") -> str:
        return str(await skiplock.current_job().wait_for("approved", timeout=60))

    first = await approve.aenqueue(7)
    await clocked_app.drain()
    assert (await clocked_app.get_job(first.id)).state is JobState.WAITING
    assert (await approve.aenqueue(7, note="again")).id == first.id
    assert (await approve.using(on_conflict="replace").aenqueue(7, note="new")).id == first.id
    parked = await clocked_app.get_job(first.id)
    assert parked.state is JobState.WAITING and parked.kwargs == {}
    with pytest.raises(DuplicateJob):
        await approve.using(on_conflict="reject").aenqueue(7)
    assert (await approve.aenqueue(8)).id != first.id  # another order's key
    await clocked_app.cancel_job(first.id)
    assert (await approve.aenqueue(7)).id != first.id  # cancelled: the key is free


async def test_a_debounce_while_the_holder_is_parked_writes_a_new_job(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    """As while it runs: the parked job read older arguments, so it gives its key up and
    still resumes."""

    @clocked_app.task(debounce=1, unique_key=lambda doc, edit=0: f"doc:{doc}")
    async def review(doc: int, edit: int = 0) -> str:
        return str(await skiplock.current_job().wait_for("reviewed", timeout=60))

    first = await review.aenqueue(5)
    clock.advance(1)
    await clocked_app.drain()
    assert (await clocked_app.get_job(first.id)).state is JobState.WAITING
    second = await review.aenqueue(5, edit=1)
    assert second.id != first.id
    assert (await clocked_app.get_job(first.id)).unique_key is None  # it gave its key up
    assert [j.id for j in await live_with_key(clocked_app, "doc:5")] == [second.id]
    await clocked_app.signal(first.id, "reviewed", "ok")
    await clocked_app.drain()
    assert await first.result(timeout=5) == "ok"


_PARKED_BEFORE = [("k", "waiting"), ("k", "pending"), ("m", "waiting"), ("n", "waiting")]
_PARKED_BEFORE += [("n", "waiting")]
"""Jobs 1-5 of an upgrade from version 23, when a parked job held no key: 1 parked and 2 a
new job holding its key; 3 parked alone; 4 and 5 parked, the same key."""


def _write_parked_before(db_url: str) -> None:
    """The jobs of ``_PARKED_BEFORE`` in a SQLite file migrated, then taken back to 23."""
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        conn.execute("DROP VIEW skiplock_jobs")
        upto = SQLITE_UNDO_KEYS.index("DROP INDEX skiplock_jobs_parked_ordered_idx")
        for statement in SQLITE_UNDO_KEYS[:upto]:  # migrations 26 to 24 (22's come next)
            conn.execute(statement)
        conn.execute("DELETE FROM skiplock_migrations WHERE version >= 24")
        for key, state in _PARKED_BEFORE:
            job = conn.execute(
                "INSERT INTO skiplock_jobs_live (queue, task, max_attempts, run_at, created_at,"
                " state, unique_key, unique_scope) VALUES ('default', 'approve', 3, 0, 0, ?, ?,"
                " 'approve') RETURNING id",
                (state, key),
            ).fetchone()[0]
            if state == "waiting":
                conn.execute(
                    "INSERT INTO skiplock_waits (job_id, signal, signal_seq, created_at)"
                    " VALUES (?, 'approved', 1, 0)",
                    (job,),
                )
    finally:
        conn.close()


async def _write_parked_before_pg(db_url: str) -> None:
    await pg_schema_at(db_url, 23)
    schema = parse_qs(urlsplit(db_url).query)["schema"][0]
    conn = await asyncpg.connect(PG_URL)
    try:
        for key, state in _PARKED_BEFORE:
            job = await conn.fetchval(
                f"""INSERT INTO "{schema}".skiplock_jobs
                    (queue, task, max_attempts, state, unique_key, unique_scope)
                    VALUES ('default', 'approve', 3, $1, $2, 'approve') RETURNING id""",
                state,
                key,
            )
            if state == "waiting":
                await conn.execute(
                    f"""INSERT INTO "{schema}".skiplock_waits (job_id, signal, signal_seq)
                        VALUES ($1, 'approved', 1)""",
                    job,
                )
    finally:
        await conn.close()


async def test_an_upgrade_gives_each_parked_job_its_key_back_unless_another_holds_it(
    db_url: str,
) -> None:
    """Migration 24: a parked job whose key another job took gives it up for good (it still
    resumes); one parked alone, or the first of its key, holds it again."""
    if db_url.startswith("sqlite"):
        app = skiplock.App(db_url)
        await app.migrate()
        await app.close()
        _write_parked_before(db_url)
    else:
        await _write_parked_before_pg(db_url)
    app = skiplock.App(db_url)

    @app.task(name="approve")
    async def approve() -> str:
        return str(await skiplock.current_job().wait_for("approved", timeout=60))

    try:
        assert 24 in await app.migrate()
        keys = [(await app.get_job(i)).unique_key for i in range(1, 6)]
        assert keys == [None, "k", "m", "n", None]
        assert (await approve.using(unique_key="m").aenqueue()).id == 3  # it holds its key again
        assert (await approve.using(unique_key="n").aenqueue()).id == 4
        assert (await approve.using(unique_key="k").aenqueue()).id == 2
        for job in (1, 3, 4, 5):
            receipt = await app.signal(job, "approved", "yes")
            assert receipt.outcome is skiplock.SignalOutcome.DELIVERED
        await app.drain()
        for job in (1, 3, 4, 5):
            assert (await app.get_job(job)).state is JobState.SUCCEEDED
    finally:
        await app.close()


# -- concurrency: PostgreSQL's enqueues race each other and the claims ----------------------


async def test_concurrent_debounced_enqueues_leave_one_job_with_the_last_arguments(
    pg_url: str,
) -> None:
    app = skiplock.App(pg_url)
    await app.migrate()
    try:

        @app.task(debounce=60, unique_key="race")
        async def reindex(n: int) -> None: ...

        backend = await app.backend()
        claims: list[int] = []

        async def claimer() -> None:
            for _ in range(20):
                claims.extend(c.id for c in await backend.job_get_available(claim()))
                await asyncio.sleep(0)

        async def enqueue(n: int) -> int:
            return (await reindex.aenqueue(n)).id

        ids = await asyncio.gather(*(enqueue(n) for n in range(40)), claimer())
        live = await live_with_key(app, "race")
        assert len(live) <= 1
        pending = [j for j in live if j.state is JobState.PENDING]
        assert len(pending) == 1, live  # run_at is a minute away: never claimed
        final = await reindex.aenqueue(99)
        assert final.id == pending[0].id
        assert (await app.get_job(final.id)).args == [99]
        assert set(ids[:40]) == {pending[0].id} and claims == []
    finally:
        await app.close()


async def test_a_debounce_that_loses_its_running_holder_to_a_finish_looks_again(
    pg_url: str,
) -> None:
    """The race ``RACE_LOST`` covers: the running holder finishes (its row moves to history)
    while the debounce waits to take its key; the step fails alone and answers False."""
    import asyncpg

    from skiplock._backends import flows

    app = skiplock.App(pg_url)
    await app.migrate()
    try:

        @app.task(debounce=60, unique_key="moved")
        async def reindex(n: int) -> None: ...

        first = await reindex.aenqueue(1)
        backend: Any = await app.backend()
        schema = pg_url.rsplit("schema=", 1)[1]
        finisher = await asyncpg.connect(pg_url.split("?")[0])
        waiter = await asyncpg.connect(pg_url.split("?")[0])
        try:
            await finisher.execute(
                f"UPDATE \"{schema}\".skiplock_jobs SET state = 'running' WHERE id = $1", first.id
            )
            tx = finisher.transaction()
            await tx.start()
            await finisher.execute(
                f"UPDATE \"{schema}\".skiplock_jobs SET state = 'succeeded', finished_at = now()"
                " WHERE id = $1",
                first.id,
            )
            answer = backend._asyncpg_answers(waiter)
            release = asyncio.ensure_future(
                answer(flows.ReleaseRunning(reindex.prepare(2), first.id))
            )
            pid = waiter.get_server_pid()

            waits = "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1"
            deadline = time.monotonic() + 30
            while await finisher.fetchval(waits, pid) != "Lock":  # the event: it waits on the row
                assert time.monotonic() < deadline, "the debounce never waited on the row"
                await asyncio.sleep(0.01)
            await tx.commit()
            assert await release is False  # lost the race: nothing done, no error
            second = await reindex.aenqueue(2)  # the key is free: a new job
            assert second.id != first.id
        finally:
            await finisher.close()
            await waiter.close()
    finally:
        await app.close()
