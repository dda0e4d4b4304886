"""Exactly-once releases under concurrency: the last two parents of one child finishing on
two connections at the same instant, forced step by step (the release flow driven by hand on
two PostgreSQL transactions, the second blocked on the first's lock); and many releases of
one fan-in racing on both databases. However they interleave, the child is released once."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

import skiplock
from skiplock import JobState
from skiplock._backends import workflow_flows as wf
from skiplock._backends.postgres import PostgresBackend
from skiplock._backends.postgres.url import parse_postgres_url

pytestmark = pytest.mark.slow


def tasks(app: skiplock.App) -> tuple[Any, Any]:
    @app.task(name="parent")
    def parent(n: int) -> int:
        return n

    @app.task(name="child")
    def child(*results: Any) -> list[Any]:
        return list(results)

    return parent, child


async def finish_without_release(app: skiplock.App, url: str, ids: list[int]) -> None:
    """The parents' rows as a completion leaves them, and no release: a person's SQL (or a
    worker that died right after its completion statement)."""
    backend = await app.backend()
    if url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        marks = ",".join("?" * len(ids))
        conn.execute(
            "UPDATE skiplock_jobs_live SET state = 'succeeded', finished_at = 1, result = '7' "
            f"WHERE id IN ({marks})",
            ids,
        )
        conn.close()
        return
    assert isinstance(backend, PostgresBackend)
    await backend.pool.execute(
        f'UPDATE "{backend.schema}".skiplock_jobs SET state = $2, finished_at = now(), '
        "result = '7' WHERE id = ANY($1::bigint[])",
        ids,
        "succeeded",
    )


async def step_until(flow: Any, answer: Any, kind: type, first: Any = None) -> tuple[Any, Any]:
    """Drive ``flow`` with ``answer`` until it yields a step of ``kind``; return that step
    (unanswered) and the flow."""
    step = next(flow) if first is None else first
    while not isinstance(step, kind):
        step = flow.send(await answer(step))
    return step, flow


async def resume(flow: Any, answer: Any, value: Any) -> list[int]:
    """Send ``value`` (the answer to the step the flow waits on), then drive it to its end."""
    try:
        step = flow.send(value)
        while True:
            step = flow.send(await answer(step))
    except StopIteration as done:
        return list(done.value)


async def test_the_last_two_parents_released_at_once_release_the_child_once(
    pg_url: str,
) -> None:
    async with two_last_parents(pg_url) as (app, backend, c, p1, p2, a, b):
        ta, tb = a.transaction(), b.transaction()
        await ta.start()
        await tb.start()
        answer_a, answer_b = backend._wf_answers(a), backend._wf_answers(b)
        # both resolve their parent's edge (two rows: neither waits)
        step_a, flow_a = await step_until(wf.release([p1.id]), answer_a, wf.Decrement)
        step_b, flow_b = await step_until(wf.release([p2.id]), answer_b, wf.Decrement)
        # A counts its parent off first; B's count waits on the child's wait row
        first_zero = await answer_a(step_a)
        assert first_zero == []  # one parent left, as A sees it
        b_counts = asyncio.create_task(answer_b(step_b))
        await wait_for_lock(backend, b.get_server_pid())
        assert not b_counts.done()
        released_a = await resume(flow_a, answer_a, first_zero)
        await ta.commit()
        zero = await b_counts
        assert zero == [c.id]  # B's count, after A's, reaches zero
        released_b = await resume(flow_b, answer_b, zero)
        await tb.commit()
        assert released_a == [] and released_b == [c.id]
        assert (await app.get_job(c.id)).state is JobState.PENDING
        assert (await app.get_job(c.id)).args == []  # no results asked for


@contextlib.asynccontextmanager
async def two_last_parents(
    pg_url: str,
) -> AsyncIterator[tuple[skiplock.App, PostgresBackend, Any, Any, Any, Any, Any]]:
    """A child of two parents both finished and neither released, and two sessions of our
    own to release them on (closed, with the app, at the end)."""
    app = skiplock.App(pg_url)
    await app.migrate()
    try:
        parent, child = tasks(app)
        p1, p2 = await parent.aenqueue(1), await parent.aenqueue(2)
        c = await child.using(depends_on=[p1, p2]).aenqueue()
        await finish_without_release(app, pg_url, [p1.id, p2.id])
        backend = await app.backend()
        assert isinstance(backend, PostgresBackend)
        dsn = parse_postgres_url(pg_url).dsn
        a, b = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
        try:
            yield app, backend, c, p1, p2, a, b
        finally:
            await a.close()
            await b.close()
    finally:
        await app.close()


async def wait_for_lock(backend: PostgresBackend, pid: int, timeout: float = 10) -> None:
    """Until the session ``pid`` waits on a lock (pg_stat_activity), not a sleep."""
    deadline = time.monotonic() + timeout
    while True:
        waiting = await backend.pool.fetchval(
            "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid
        )
        if waiting:
            return
        assert time.monotonic() < deadline, "the second release never waited on the lock"
        await asyncio.sleep(0.01)


async def test_two_prunes_racing_count_each_pruned_batch_member_once(pg_url: str) -> None:
    """Two workers' pruners on the same gone members, forced: A deletes them (uncommitted), B
    waits on A's row locks, then finds them gone. The batch counts each member once."""
    app = skiplock.App(pg_url)
    await app.migrate()
    try:
        parent, child = tasks(app)
        async with app.batch(on_complete=child.s()) as batch:
            members = [await parent.aenqueue(n) for n in range(3)]
            await parent.using(run_after=timedelta(hours=1)).aenqueue(3)
        await app.drain()
        backend = await app.backend()
        assert isinstance(backend, PostgresBackend)
        await backend.pool.execute(  # the retention's job prune, as a person's SQL
            f'DELETE FROM "{backend.schema}".skiplock_jobs WHERE id = ANY($1::bigint[])',
            [m.id for m in members],
        )
        dsn = parse_postgres_url(pg_url).dsn
        a, b = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
        try:
            ta = a.transaction()
            await ta.start()
            assert await a.fetchval(backend._wf.WORKFLOW_PRUNE, 100) == 3
            b_prunes = asyncio.create_task(b.fetchval(backend._wf.WORKFLOW_PRUNE, 100))
            await wait_for_lock(backend, b.get_server_pid())
            await ta.commit()
            assert await b_prunes == 0  # A's rows went while B waited: none of them is B's
        finally:
            await a.close()
            await b.close()
        assert (await batch.info()).counts == {"gone": 3, "pending": 1}
    finally:
        await app.close()


async def test_many_releases_of_one_fan_in_racing_release_it_once(db_url: str) -> None:
    app = skiplock.App(db_url)
    await app.migrate()
    others = [app.new_backend() for _ in range(4)]
    try:
        parent, child = tasks(app)
        parents = [await parent.aenqueue(n) for n in range(40)]
        c = await child.using(depends_on=parents).aenqueue()
        await finish_without_release(app, db_url, [p.id for p in parents])
        for backend in others:
            await backend.open()
        calls = [others[n % len(others)].workflow_release([p.id]) for n, p in enumerate(parents)]
        calls += [b.workflow_sweep() for b in others]  # the sweeps race them too
        results = await asyncio.gather(*calls)
        released = [i for r in results[: len(parents)] for i in r]
        released += [i for r in results[len(parents) :] for i in r.released]
        assert released == [c.id]
        assert (await app.get_job(c.id)).state is JobState.PENDING
    finally:
        for backend in others:
            await backend.close()
        await app.close()


async def test_a_timeout_and_a_signal_racing_resolve_to_one_outcome(db_url: str) -> None:
    """The wait's timeout has passed and a signal comes at the same instant as the sweep that
    times it out, ten times over: each job ends one way, the same way its run sees."""
    from .helpers import FakeClock

    clock = FakeClock()
    app = skiplock.App(db_url, clock=clock)
    await app.migrate()
    sweeper = app.new_backend()
    try:

        @app.task(name="wait")
        async def wait() -> str:
            try:
                return str(await skiplock.current_job().wait_for("go", timeout=5))
            except skiplock.SignalTimeout:
                return "timed out"

        await sweeper.open()
        seen = set()
        for _ in range(10):  # a round each: one parked job, its signal against the sweep
            h = await wait.aenqueue()
            await app.drain()
            clock.advance(6)
            sent, swept = await asyncio.gather(
                app.signal(h.id, "go", "signal"), sweeper.workflow_sweep()
            )
            await app.drain()
            result = await h.result(timeout=5)
            seen.add(sent.outcome)
            if sent.outcome is skiplock.SignalOutcome.DELIVERED:
                assert h.id not in swept.timed_out and result == "signal"
            else:  # the timeout came first: the signal is kept for a next wait
                assert sent.outcome is skiplock.SignalOutcome.KEPT
                assert swept.timed_out == [h.id] and result == "timed out"
        assert seen  # each round ended one way
    finally:
        await sweeper.close()
        await app.close()


async def test_the_sweep_looks_past_children_that_wait_for_a_retry(db_url: str) -> None:
    """A dead parent whose child waits for its retry (``wait``) is no work for the sweep: a
    look of one finds the finished parent whose release a crash left undone instead."""
    app = skiplock.App(db_url)
    await app.migrate()
    try:
        parent, child = tasks(app)

        @app.task(name="doomed", max_attempts=1)
        def doomed() -> None:
            raise RuntimeError("no")

        dead = await doomed.aenqueue()
        await child.using(depends_on=[dead], on_parent_failure="wait").aenqueue()
        await app.drain()
        assert (await app.get_job(dead.id)).state is JobState.DEAD
        done = await parent.aenqueue(1)
        c = await child.using(depends_on=[done]).aenqueue()
        await finish_without_release(app, db_url, [done.id])
        backend = await app.backend()
        answers: Any = backend._wf_answers  # type: ignore[attr-defined]
        if db_url.startswith("sqlite"):
            found = await backend._run(  # type: ignore[attr-defined]
                "look", lambda conn: answers(conn)(wf.OpenParents(1))
            )
        else:
            async with backend.pool.acquire() as conn:  # type: ignore[attr-defined]
                found = await answers(conn)(wf.OpenParents(1))
        assert found == [done.id]
        assert (await backend.workflow_sweep()).released == [c.id]
    finally:
        await app.close()


async def test_the_one_statement_release_of_two_last_parents_at_once_releases_once(
    pg_url: str,
) -> None:
    """The completion's own release (RELEASE_SUCCEEDED, one statement) on two sessions for
    the last two parents of one child: the second waits on the first's lock of the child's
    wait row, then decides on the count the lock found, not on its older snapshot."""
    async with two_last_parents(pg_url) as (app, backend, c, p1, p2, a, b):
        statement = backend._wf.RELEASE_SUCCEEDED
        ta = a.transaction()
        await ta.start()
        first = await a.fetchrow(statement, [p1.id], backend.channel, None, 1000, "default")
        second = asyncio.create_task(
            b.fetchrow(statement, [p2.id], backend.channel, None, 1000, "default")
        )
        await wait_for_lock(backend, b.get_server_pid())
        await ta.commit()
        last = await second
        released = (first["released"] or []) + (last["released"] or [])
        stale = (first["stale"] or []) + (last["stale"] or [])
        # the second decided on the count its lock found: zero, once (released at once, or
        # left at zero for a newer snapshot when the first committed after its own began)
        assert sorted(released + stale) == [c.id]
        if stale:
            ready = await b.fetch(backend._wf.CHILDREN_READY, stale, backend.channel, None, 2**20)
            assert [r["id"] for r in ready] == [c.id]
        record = await app.get_job(c.id)
        assert record.state is JobState.PENDING and record.args == []


async def test_a_release_older_than_the_count_it_locked_leaves_the_results_to_a_newer_one(
    pg_url: str,
) -> None:
    """A chord's body's two parents: the first's outcome and release in one open
    transaction, the second's release begun before that commits (so its snapshot holds
    neither the first's result nor its edge) and blocked on the body's wait row. Reading the
    results in that snapshot would give the body [None, 2]: the release leaves the body at
    zero instead (stale), and CHILDREN_READY, a statement of its own, passes [1, 2]."""
    app = skiplock.App(pg_url)
    await app.migrate()
    dsn = parse_postgres_url(pg_url).dsn
    a, b = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        parent, child = tasks(app)
        handle = await skiplock.chord([parent.s(1), parent.s(2)], child.s()).aenqueue()
        p1, p2, body = handle.ids
        backend = await app.backend()
        assert isinstance(backend, PostgresBackend)
        jobs = f'"{backend.schema}".skiplock_jobs'
        finish = (
            f"UPDATE {jobs} SET state = 'succeeded', finished_at = now(), result = $2 WHERE id = $1"
        )
        await b.execute(finish, p2, "2")
        statement = backend._wf.RELEASE_SUCCEEDED
        ta = a.transaction()
        await ta.start()
        await a.execute(finish, p1, "1")
        first = await a.fetchrow(statement, [p1], backend.channel, None, 1000, "default")
        second = asyncio.create_task(
            b.fetchrow(statement, [p2], backend.channel, None, 1000, "default")
        )
        await wait_for_lock(backend, b.get_server_pid())
        await ta.commit()
        last = await second
        assert first["released"] is None and first["stale"] is None
        assert last["released"] is None and last["stale"] == [body]
        assert (await app.get_job(body)).state is JobState.WAITING
        ready = await b.fetch(backend._wf.CHILDREN_READY, [body], backend.channel, None, 2**20)
        assert [r["id"] for r in ready] == [body]
        record = await app.get_job(body)
        assert record.state is JobState.PENDING and record.args == [[1, 2]]
    finally:
        await a.close()
        await b.close()
        await app.close()


async def test_the_sweep_releases_a_child_a_release_left_at_zero(db_url: str) -> None:
    """A release that left its child at zero for a newer snapshot, and whose process died
    before that ran: the sweep's second look releases it, with its parents' results."""
    app = skiplock.App(db_url)
    await app.migrate()
    try:
        parent, child = tasks(app)
        handle = await skiplock.chord([parent.s(1), parent.s(2)], child.s()).aenqueue()
        p1, p2, body = handle.ids
        await finish_without_release(app, db_url, [p1, p2])
        backend = await app.backend()
        # the edges resolved and the count at zero, as a stale release leaves them
        if db_url.startswith("sqlite"):
            import sqlite3

            conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
            conn.execute(
                "UPDATE skiplock_deps SET parent_state = 'succeeded', parent_result = '7' "
                "WHERE child_id = ?",
                (body,),
            )
            conn.execute("UPDATE skiplock_waits SET parents_left = 0 WHERE job_id = ?", (body,))
            conn.close()
        else:
            assert isinstance(backend, PostgresBackend)
            s = f'"{backend.schema}"'
            await backend.pool.execute(
                f"UPDATE {s}.skiplock_deps SET parent_state = 'succeeded', "
                "parent_result = '7' WHERE child_id = $1",
                body,
            )
            await backend.pool.execute(
                f"UPDATE {s}.skiplock_waits SET parents_left = 0 WHERE job_id = $1", body
            )
        assert (await app.get_job(body)).state is JobState.WAITING
        assert (await backend.workflow_sweep()).released == [body]
        record = await app.get_job(body)
        assert record.state is JobState.PENDING and record.args == [[7, 7]]
    finally:
        await app.close()


async def test_a_release_of_ours_wakes_our_workers_once_not_again_by_its_notify(
    pg_url: str,
) -> None:
    """The worker that released a child is told at once (``on_released``); the NOTIFY the
    release sends at commit would wake it a second time, for a claim that finds nothing in
    the path of a chain's next link. It is passed over here, and only here: another
    session's NOTIFY on the same queue still wakes."""
    app = skiplock.App(pg_url)
    await app.migrate()
    dsn = parse_postgres_url(pg_url).dsn
    other = await asyncpg.connect(dsn)
    try:
        parent, child = tasks(app)
        p = await parent.aenqueue(1)
        c = await child.using(depends_on=[p]).aenqueue()
        await finish_without_release(app, pg_url, [p.id])
        backend = await app.backend()
        assert isinstance(backend, PostgresBackend)
        told: list[set[str]] = []
        woken: list[str] = []
        arrived = asyncio.Event()

        def on_wake(queue: str) -> None:
            woken.append(queue)
            arrived.set()

        backend.on_released = told.append
        async with backend.listen(on_wake):
            await backend._release_succeeded([p.id], "default")
            assert told == [{"default"}]
            assert (await app.get_job(c.id)).state is JobState.PENDING
            # notifications come in commit order: the release's first, then this one
            await other.execute("SELECT pg_notify($1, 'default')", backend.channel)
            await asyncio.wait_for(arrived.wait(), 10)
        assert woken == ["default"]
    finally:
        await other.close()
        await app.close()
