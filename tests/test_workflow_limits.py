"""Workflows at their edges (issue 42), on both databases: a chord's body whose parents'
results are too large to pass dies alone (PayloadTooLarge), whichever path releases it; a
sweep item the database refuses is logged and skipped, and the worker goes on; a retry of a
chain link that was cancelled waits for its parent (or is refused when the parent's result
is gone), never runs without its input; a ``wait`` child whose dead parent was pruned is
cancelled, naming the parent, instead of waiting for ever."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Any

import pytest

import skiplock
from skiplock import JobFailed, JobState, ParentResultGone, PayloadTooLarge, chain, chord
from skiplock._backends.postgres import PostgresBackend

from .helpers import running

MEMBER_BYTES = 1000
BOUND = 10_000


def chord_tasks(app: skiplock.App) -> tuple[Any, Any, Any, list[str]]:
    """A member returning ``MEMBER_BYTES`` of text, a body that counts them, and a job that
    runs after the body; ``ran`` records each body and each after-job that ran."""
    ran: list[str] = []

    @app.task(name="member")
    def member(n: int) -> str:
        return str(n % 10) * MEMBER_BYTES

    @app.task(name="body")
    def body(values: list[str]) -> int:
        ran.append(f"body {len(values)}")
        return len(values)

    @app.task(name="after")
    def after() -> None:
        ran.append("after")

    return member, body, after, ran


async def test_a_chord_body_over_the_payload_bound_dies_alone(db_url: str) -> None:
    """30 results of 1,000 bytes make a 30 kB list, three times ``max_payload_bytes``: the
    body is dead with PayloadTooLarge naming the sizes (the list never built, never run), a
    job after it follows its policy, a small chord beside it runs, nothing is left waiting."""
    app = skiplock.App(db_url, max_payload_bytes=BOUND)
    await app.migrate()
    try:
        member, body, after, ran = chord_tasks(app)
        big = await chord([member.s(n) for n in range(30)], body.s()).aenqueue()
        big_body = big.ids[-1]
        then = await after.using(depends_on=[big_body]).aenqueue()
        small = await chord([member.s(n) for n in range(3)], body.s()).aenqueue()
        await app.drain()
        record = await app.get_job(big_body)
        assert record.state is JobState.DEAD
        error = record.errors[-1]
        assert error["type"] == "PayloadTooLarge"
        size = 30 * (MEMBER_BYTES + 2) + 29 + 2  # 30 JSON strings, commas, brackets
        assert f"its 30 parents' results is {size} bytes" in error["message"]
        assert f"over max_payload_bytes ({BOUND})" in error["message"]
        assert record.args == []  # its list was never put together
        with pytest.raises(JobFailed, match="over max_payload_bytes"):
            await big.result(timeout=10)
        assert (await app.get_job(then.id)).state is JobState.CANCELLED
        assert await small.result(timeout=10) == 3
        assert ran == ["body 3"]
        assert await app.waiting_jobs() == []
        # it stays dead in a bulk requeue (it would run without its input); its own retry
        # says why it cannot run
        assert await app.requeue_dead(skiplock.JobFilter(task="body")) == []
        with pytest.raises(PayloadTooLarge, match=f"job {big_body} was not retried"):
            await app.retry_job(big_body)
        assert (await app.get_job(big_body)).state is JobState.DEAD
    finally:
        await app.close()


async def finish_without_release(app: skiplock.App, ids: list[int], result: str) -> None:
    """The parents' rows as a completion leaves them, and no release (a worker that died
    right after its completion statement; tests/test_workflow_races.py does the same)."""
    backend = await app.backend()
    if isinstance(backend, PostgresBackend):
        await backend.pool.execute(
            f"UPDATE \"{backend.schema}\".skiplock_jobs SET state = 'succeeded', "
            "finished_at = now(), result = $2::jsonb WHERE id = ANY($1::bigint[])",
            ids,
            result,
        )
        return
    conn = sqlite3.connect(app.url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        marks = ",".join("?" * len(ids))
        conn.execute(
            "UPDATE skiplock_jobs_live SET state = 'succeeded', finished_at = 1, result = ? "
            f"WHERE id IN ({marks})",
            [result, *ids],
        )
    finally:
        conn.close()


async def test_the_sweep_buries_an_oversized_body_a_crash_left_waiting(db_url: str) -> None:
    """The members finished and their worker died before the release: the sweep, which
    gathers them, buries the body (and lets the rest of its look go on) instead of failing."""
    app = skiplock.App(db_url, max_payload_bytes=BOUND)
    await app.migrate()
    try:
        member, body, _after, _ran = chord_tasks(app)
        big = await chord([member.s(n) for n in range(30)], body.s()).aenqueue()
        fine = await chord([member.s(n) for n in range(2)], body.s()).aenqueue()
        await finish_without_release(app, big.ids[:-1], '"' + "y" * MEMBER_BYTES + '"')
        await finish_without_release(app, fine.ids[:-1], '"z"')
        swept = await (await app.backend()).workflow_sweep()
        assert swept.released == [fine.ids[-1]]
        record = await app.get_job(big.ids[-1])
        assert record.state is JobState.DEAD
        assert record.errors[-1]["type"] == "PayloadTooLarge"
        assert (await app.get_job(fine.ids[-1])).args == [["z", "z"]]
    finally:
        await app.close()


def refuse_release_of(app: skiplock.App, job_id: int) -> Any:
    """A trigger that makes the database refuse the release of ``job_id`` (the removal of
    its wait row): a fault in one sweep item, as a user's trigger or a limit would be.
    Returns a coroutine function that drops it."""

    async def install() -> None:
        backend = await app.backend()
        if isinstance(backend, PostgresBackend):
            s = f'"{backend.schema}"'
            await backend.pool.execute(
                f"CREATE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ "
                "BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$"
            )
            await backend.pool.execute(
                f"CREATE TRIGGER refuse BEFORE DELETE ON {s}.skiplock_waits FOR EACH ROW "
                f"WHEN (OLD.job_id = {job_id}) EXECUTE FUNCTION {s}.refuse()"
            )
            return
        conn = sqlite3.connect(app.url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute(
            f"CREATE TRIGGER refuse BEFORE DELETE ON skiplock_waits WHEN OLD.job_id = {job_id} "
            "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
        )
        conn.close()

    async def drop() -> None:
        backend = await app.backend()
        if isinstance(backend, PostgresBackend):
            s = f'"{backend.schema}"'
            await backend.pool.execute(f"DROP TRIGGER refuse ON {s}.skiplock_waits")
            return
        conn = sqlite3.connect(app.url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("DROP TRIGGER refuse")
        conn.close()

    return install, drop


async def test_a_sweep_item_the_database_refuses_is_logged_and_the_worker_goes_on(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Two children whose parents' releases a crash left undone; the database refuses one
    of them. The worker's sweep releases the other, logs the refused one, keeps serving
    jobs, and releases the refused one once the database takes it."""
    app = skiplock.App(db_url)
    await app.migrate()
    try:

        @app.task(name="parent")
        def parent() -> int:
            return 1

        @app.task(name="child")
        def child(result: int) -> int:
            return result + 1

        refused = await chain(parent.s(), child.s()).aenqueue()
        fine = await chain(parent.s(), child.s()).aenqueue()
        await finish_without_release(app, [refused.ids[0], fine.ids[0]], "1")
        install, drop = refuse_release_of(app, refused.ids[1])
        await install()
        caplog.set_level(logging.WARNING)
        async with running(app, maintenance_interval_s=0.05) as worker:
            swept = worker.signals.swept.arm()
            await swept.wait_for([fine.ids[1]], timeout=20)
            assert await fine.result(timeout=10) == 2
            # the worker serves on after the refused item, sweep after sweep
            later = await parent.aenqueue()
            assert await later.result(timeout=10) == 1
            assert (await app.get_job(refused.ids[1])).state is JobState.WAITING
            assert f"the release of job {refused.ids[0]}'s children failed" in caplog.text
            assert "refused by a trigger" in caplog.text
            await drop()
            await swept.wait_for([refused.ids[1]], timeout=20)
            assert await refused.result(timeout=10) == 2
    finally:
        await app.close()


# -- retrying a link that never got its input ---------------------------------------------


def chain_tasks(app: skiplock.App) -> tuple[Any, Any, list[tuple[Any, ...]]]:
    calls: list[tuple[Any, ...]] = []

    @app.task(name="first", queue="slow")
    def first(x: int) -> int:
        calls.append(("first", x))
        return x

    @app.task(name="add")
    def add(x: int, y: int) -> int:
        calls.append(("add", x, y))
        return x + y

    return first, add, calls


async def state(app: skiplock.App, job_id: int) -> JobState:
    return (await app.get_job(job_id)).state


async def test_a_retried_cancelled_link_waits_for_its_parent_that_will_still_run(
    app: skiplock.App,
) -> None:
    """``first(1) | add(10) | add(100)``: a person cancels the second link while the first
    has not run (its next link is cancelled with it), then retries both. They wait for the
    first again and run with its result, in order, never at once without it."""
    first, add, calls = chain_tasks(app)
    handle = await chain(first.s(1), add.s(10), add.s(100)).aenqueue()
    _a, b, c = handle.ids
    assert await app.cancel_job(b) is JobState.CANCELLED
    assert await state(app, c) is JobState.CANCELLED
    assert await app.retry_job(b)
    assert await app.retry_job(c)
    assert await state(app, b) is JobState.WAITING
    assert await state(app, c) is JobState.WAITING
    await app.drain(queues=["default"])  # the first link's queue is not served yet
    assert calls == []
    waiting = {w.id: w.parents_left for w in await app.waiting_jobs()}
    assert waiting == {b: 1, c: 1}
    await app.drain()
    assert await handle.result(timeout=10) == 111
    assert calls == [("first", 1), ("add", 1, 10), ("add", 11, 100)]


async def test_a_retried_cancelled_link_whose_parent_finished_runs_with_its_result(
    app: skiplock.App,
) -> None:
    first, add, calls = chain_tasks(app)
    handle = await chain(first.s(5), add.s(10)).aenqueue()
    a, b = handle.ids
    await app.cancel_job(b)
    await app.drain()
    assert await state(app, a) is JobState.SUCCEEDED
    assert await state(app, b) is JobState.CANCELLED
    assert await app.retry_job(b)
    assert (await app.get_job(b)).args == [5, 10]
    await app.drain()
    assert await handle.result(timeout=10) == 15
    assert calls == [("first", 5), ("add", 5, 10)]


async def test_a_retry_of_a_link_whose_parent_died_is_refused_until_the_parent_is_retried(
    app: skiplock.App,
) -> None:
    """The parent died, so its link was cancelled (ParentFailed). Retrying the link alone
    cannot give it an input: refused, naming the parent, nothing changed. Once the parent
    is retried, the link's retry waits for it and runs with its result."""
    broken = {"on": True}
    ran: list[Any] = []

    @app.task(name="fetch", max_attempts=1)
    def fetch() -> int:
        if broken["on"]:
            raise RuntimeError("upstream is down")
        return 7

    @app.task(name="double")
    def double(x: int) -> int:
        ran.append(x)
        return 2 * x

    handle = await chain(fetch.s(), double.s()).aenqueue()
    a, b = handle.ids
    await app.drain()
    assert await state(app, a) is JobState.DEAD
    assert await state(app, b) is JobState.CANCELLED
    with pytest.raises(ParentResultGone, match=f"parent job {a}, which ended dead"):
        await app.retry_job(b)
    assert await state(app, b) is JobState.CANCELLED
    broken["on"] = False
    assert await app.retry_job(a)
    assert await app.retry_job(b)
    assert await state(app, b) is JobState.WAITING
    await app.drain()
    assert await handle.result(timeout=10) == 14
    assert ran == [7]


# -- a `wait` child of a pruned parent ------------------------------------------------------


async def test_a_wait_child_of_a_dead_parent_the_pruner_removes_is_cancelled(
    app: skiplock.App,
) -> None:
    """The child waits for its dead parent's retry (``on_parent_failure="wait"``); the
    worker's pruner removes the dead parent at its retention: no retry can come, so the
    child is cancelled with a reason naming the parent, not left waiting for ever."""

    @app.task(name="flaky", max_attempts=1)
    def flaky() -> None:
        raise RuntimeError("down")

    @app.task(name="report")
    def report() -> None:
        pass

    parent = await flaky.aenqueue()
    child = await report.using(depends_on=[parent], on_parent_failure="wait").aenqueue()
    await app.drain()
    assert await state(app, parent.id) is JobState.DEAD
    assert await state(app, child.id) is JobState.WAITING
    options = {"retention_dead_s": 0.001, "prune_interval_s": 0.05, "maintenance_interval_s": 0.05}
    async with running(app, **options):
        await settled(app, child.id, 20)
    with pytest.raises(skiplock.JobNotFound):
        await app.get_job(parent.id)
    record = await app.get_job(child.id)
    assert record.state is JobState.CANCELLED
    assert record.errors[-1]["type"] == "ParentFailed"
    assert f"parent job {parent.id} is gone (pruned or discarded)" in record.errors[-1]["message"]
    assert "on_parent_failure='wait'" in record.errors[-1]["message"]
    assert await app.waiting_jobs() == []
    with pytest.raises(ParentResultGone, match=f"parent job {parent.id}, which is gone"):
        await app.retry_job(child.id)


async def settled(app: skiplock.App, job_id: int, timeout: float) -> None:
    """Until the job is no longer waiting (its state read from the database)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while await state(app, job_id) is JobState.WAITING:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"job {job_id} still waits after {timeout} s")
        await asyncio.sleep(0.05)
