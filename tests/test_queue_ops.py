"""Queue operations on SQLite and PostgreSQL: bounds, unique keys, pauses, breaker, limits."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

import skiplock
from skiplock import Breaker, DuplicateJob, JobState, QueueFull, Worker

from .helpers import FakeClock

ROOT = Path(__file__).resolve().parent.parent


async def burst(app: skiplock.App, **options: object) -> None:
    worker = Worker(app, poll_interval_s=0.05, scheduler=False, **options)  # type: ignore[arg-type]
    await asyncio.wait_for(worker.run(burst=True), timeout=60)


async def test_bounded_queue_says_not_now_all_or_nothing(app: skiplock.App) -> None:
    @app.task(name="b", queue="bounded")
    async def b(n: int) -> None:
        pass

    await app.set_queue_limits("bounded", max_depth=3)
    await b.aenqueue(1)
    await b.aenqueue(2)
    with pytest.raises(QueueFull, match="'bounded' is at its max_depth"):
        await app.enqueue_many([b.prepare(3), b.prepare(4)])
    assert (await app.counts("bounded"))["pending"] == 2  # nothing of the batch was written
    await b.aenqueue(3)
    with pytest.raises(QueueFull):
        await b.aenqueue(4)
    await b.using(queue="other").aenqueue(5)  # other queues are not bounded
    await burst(app)
    await app.enqueue_many([b.prepare(n) for n in range(3)])  # room again once drained
    (info,) = [q for q in await app.queues() if q.name == "bounded"]
    assert (info.max_depth, info.pending) == (3, 3)
    await app.set_queue_limits("bounded", max_depth=None)  # lift the bound
    await b.aenqueue(9)


async def test_setting_one_queue_limit_keeps_the_others(app: skiplock.App) -> None:
    """The guide's order: limits first, aging a minute later; the rate must survive it."""
    await app.set_queue_limits("email", max_running=50, rate_per_s=20, create=True)
    await app.set_queue_limits("email", aging_s=30)
    email = await app.queue_info("email")
    assert (email.max_depth, email.max_running, email.rate_per_s, email.aging_s) == (
        None,
        50,
        20,
        30,
    )
    await app.set_queue_limits("email", rate_per_s=None)  # None lifts the one named
    email = await app.queue_info("email")
    assert (email.max_running, email.rate_per_s, email.aging_s) == (50, None, 30)
    await app.set_queue_limits("email")  # nothing named: nothing changes
    assert await app.queue_info("email") == email


async def test_unique_keys_while_live(app: skiplock.App) -> None:
    @app.task(name="u")
    async def u(n: int) -> None:
        pass

    first = await u.using(unique_key="report:42").aenqueue(1)
    again = await u.using(unique_key="report:42").aenqueue(2)
    assert again.id == first.id
    with pytest.raises(DuplicateJob) as raised:
        await u.using(unique_key="report:42", on_duplicate="raise").aenqueue(3)
    assert raised.value.job_id == first.id
    handles = await app.enqueue_many(
        [u.using(unique_key="a").prepare(1), u.prepare(2), u.using(unique_key="a").prepare(3)]
    )
    assert handles[0].id == handles[2].id != handles[1].id
    assert (await app.counts())["pending"] == 3
    await burst(app)
    fresh = await u.using(unique_key="report:42").aenqueue(4)  # finished jobs do not block
    assert fresh.id != first.id


async def test_a_dead_job_whose_key_is_held_again_is_not_requeued(app: skiplock.App) -> None:
    @app.task(name="fails_once", max_attempts=1)
    async def fails_once(n: int) -> None:
        if n == 1:
            raise ValueError("first one dies")

    dead = await fails_once.using(unique_key="k").aenqueue(1)
    await burst(app)
    assert (await dead.fetch()).state is JobState.DEAD
    live = await fails_once.using(unique_key="k").aenqueue(2)  # the dead one holds no key
    with pytest.raises(DuplicateJob, match=f"job {dead.id} was not retried"):
        await app.retry_job(dead.id)
    assert await app.requeue_dead(skiplock.JobFilter(ids=(dead.id,))) == []
    assert (await dead.fetch()).state is JobState.DEAD
    assert (await live.fetch()).state is JobState.PENDING
    await burst(app)
    assert await app.retry_job(dead.id)  # the key is free once the live one finished


async def test_unique_while_live_or_succeeded_keeps_the_key_after_success(
    app: skiplock.App,
) -> None:
    @app.task(name="once")
    async def once() -> None:
        pass

    first = await once.using(unique_key="welcome:7", unique_while="live_or_succeeded").aenqueue()
    await burst(app)
    assert (await first.fetch()).state is JobState.SUCCEEDED
    again = await once.using(unique_key="welcome:7", unique_while="live_or_succeeded").aenqueue()
    assert again.id == first.id
    # the key is held by the succeeded row, whatever the mode of the job that asks next
    other = await once.using(unique_key="welcome:7").aenqueue()
    assert other.id == first.id
    with pytest.raises(skiplock.ConfigurationError, match="unique_while"):
        once.using(unique_while="forever")  # type: ignore[arg-type]


async def test_sixteen_processes_racing_one_key_create_one_job(
    app: skiplock.App, tmp_path: Path
) -> None:
    script = (
        "from tests.apps import cli_app\n"
        "h = cli_app.record.using(unique_key='the-one').enqueue(0)\n"
        "print(h.id)\n"
    )
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "SKIPLOCK_DATABASE_URL": app.url, "PYTHONPATH": path}

    def race() -> list[str]:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", script],
                env=env,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(16)
        ]
        outs = [p.communicate(timeout=60) for p in procs]
        assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
        return [o.decode().strip() for o, _ in outs]

    ids = await asyncio.to_thread(race)
    assert len(set(ids)) == 1
    assert (await app.counts())["pending"] == 1


async def test_pausing_a_queue_and_a_task(app: skiplock.App) -> None:
    ran: list[str] = []

    @app.task(name="p1", queue="q1")
    async def p1() -> None:
        ran.append("p1")

    @app.task(name="p2", queue="q2")
    async def p2() -> None:
        ran.append("p2")

    await app.pause_queue("q1")
    await app.pause_task("p2")
    await p1.aenqueue()
    await p2.aenqueue()
    await burst(app)
    assert ran == []
    assert [p.task for p in await app.task_pauses()] == ["p2"]
    assert [q.paused for q in await app.queues() if q.name == "q1"] == [True]
    await app.resume_queue("q1")
    await burst(app)
    assert ran == ["p1"]
    assert await app.resume_task("p2")
    assert not await app.resume_task("p2")
    await burst(app)
    assert ran == ["p1", "p2"]


async def test_unknown_queue_or_task_is_a_clear_error(app: skiplock.App) -> None:
    with pytest.raises(skiplock.ConfigurationError, match="unknown queue 'nope'"):
        await app.pause_queue("nope")
    with pytest.raises(skiplock.UnknownTask):
        await app.pause_task("nope")
    with pytest.raises(skiplock.JobNotFound):
        await app.cancel_job(123456)


async def test_the_breaker_pauses_a_failing_task_then_resumes_it(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    app = clocked_app
    calls = 0

    @app.task(
        name="fragile",
        breaker=Breaker(threshold=3, window_s=60, cooldown_s=30),
        retry=skiplock.RetryPolicy(base_s=0, cap_s=0),
    )
    async def fragile() -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError("down")

    await app.enqueue_many(fragile.prepare() for _ in range(6))
    await burst(app, concurrency=1)  # the trip is a task of the worker's group: written by now
    pauses = await app.task_pauses()
    assert [p.task for p in pauses] == ["fragile"] and "breaker" in pauses[0].reason
    before = calls
    await burst(app, concurrency=1)
    assert calls == before  # paused everywhere
    clock.advance(31)  # the cool-down passes: it resumes on its own
    await burst(app, concurrency=1)
    assert calls > before


async def test_max_running_holds_across_workers(app: skiplock.App) -> None:
    running = peak = finished = 0
    all_done = asyncio.Event()

    @app.task(name="limited", queue="lim")
    async def limited() -> None:
        nonlocal running, peak, finished
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        finished += 1
        if finished == 20:
            all_done.set()

    await app.set_queue_limits("lim", max_running=2)
    await app.enqueue_many(limited.prepare() for _ in range(20))
    # not burst mode: a worker held back by the limit would think the queue was empty
    workers = [Worker(app, poll_interval_s=0.05, concurrency=5) for _ in range(2)]
    runs = [asyncio.create_task(w.run()) for w in workers]
    await asyncio.wait_for(all_done.wait(), 60)
    assert not any(r.done() for r in runs)
    for w in workers:
        w.request_stop()
    await asyncio.wait_for(asyncio.gather(*runs), 10)
    assert peak == 2 and (await app.counts("lim"))["succeeded"] == 20


async def test_rate_limit_spaces_starts(app: skiplock.App) -> None:
    """Measured on the claims' database timestamps, not on when the event loop got round to
    each handler: a loaded machine delays handlers, never the window the claim enforces."""
    all_started = asyncio.Event()
    started = 0

    @app.task(name="rated", queue="rated")
    async def rated() -> None:
        nonlocal started
        started += 1
        if started == 15:
            all_started.set()

    await app.set_queue_limits("rated", rate_per_s=5)
    handles = await app.enqueue_many(rated.prepare() for _ in range(15))
    worker = Worker(app, poll_interval_s=0.05, concurrency=20)  # burst would stop when throttled
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(all_started.wait(), 60)
    worker.request_stop()
    await asyncio.wait_for(run, 10)
    claims = sorted([(await h.fetch()).attempted_at for h in handles])  # type: ignore[type-var]
    starts = [c.timestamp() for c in claims if c is not None]
    # at most 5 claims in any one second, so 15 claims span at least two seconds
    assert len(starts) == 15 and starts[-1] - starts[0] >= 2.0 - EPSILON_S
    for first in starts:
        assert len([t for t in starts if first <= t < first + 1.0 - EPSILON_S]) <= 5


EPSILON_S = 0.001
"""Rounding of stored timestamps (SQLite keeps milliseconds)."""
