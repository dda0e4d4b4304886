"""Worker behaviour, on SQLite and PostgreSQL, in burst mode (run until nothing is ready)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

import skiplock
from skiplock import Cancel, JobState, Retry, RetryPolicy, Snooze, Worker, WorkerConfig
from skiplock._config import WorkerOptions

from .helpers import PG_URL, FakeClock


async def burst(app: skiplock.App, **options: object) -> Worker:
    worker = Worker(app, poll_interval_s=0.05, **options)  # type: ignore[arg-type]
    await asyncio.wait_for(worker.run(burst=True), timeout=60)
    return worker


async def state_of(app: skiplock.App, handle: skiplock.JobHandle) -> JobState:
    return (await handle.fetch()).state


async def test_async_and_sync_jobs_succeed(app: skiplock.App) -> None:
    seen: list[object] = []

    @app.task(name="a")
    async def a(x: int, *, y: str) -> None:
        seen.append((x, y))

    @app.task(name="s")
    def s(x: int) -> None:
        seen.append(x)

    h1 = await a.aenqueue(1, y="z")
    h2 = await s.aenqueue(2)
    await burst(app)
    assert sorted(map(str, seen)) == ["(1, 'z')", "2"]
    assert await state_of(app, h1) == await state_of(app, h2) == JobState.SUCCEEDED


async def test_a_failed_attempts_record_names_the_worker_that_ran_it(app: skiplock.App) -> None:
    """Each attempt's error record says which worker raised it (Django's worker_ids reads it:
    without it every failed attempt named the worker that claimed the job last)."""

    @app.task(name="fails_once", max_attempts=2, retry=RetryPolicy(base_s=0.0, jitter=False))
    async def fails_once() -> None:
        if skiplock.current_job().attempt == 1:
            raise RuntimeError("first")

    handle = await fails_once.aenqueue()
    await Worker(app, name="first-worker", poll_interval_s=0.05).run(burst=True)
    record = await handle.fetch()
    assert record.state is JobState.SUCCEEDED and record.attempt == 2
    assert [(e["attempt"], e["worker"]) for e in record.errors] == [(1, "first-worker")]


async def test_calling_a_task_calls_the_function(app: skiplock.App) -> None:
    @app.task
    def double(x: int) -> int:
        return 2 * x

    assert double(21) == 42
    assert double.name.endswith("double")


async def test_concurrency_is_bounded(app: skiplock.App) -> None:
    running = peak = 0

    @app.task(name="slow")
    async def slow() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1

    await app.enqueue_many(slow.prepare() for _ in range(40))
    await burst(app, concurrency=4)
    assert peak == 4
    assert (await app.counts())["succeeded"] == 40


async def test_sync_tasks_run_in_parallel_off_the_loop(app: skiplock.App) -> None:
    # Five sync jobs can only pass a five-party barrier if they all run at once.
    barrier = threading.Barrier(5, timeout=10)
    ticks = 0

    @app.task(name="blocking")
    def blocking() -> None:
        barrier.wait()

    @app.task(name="tick")
    async def tick() -> None:
        nonlocal ticks
        ticks += 1

    handles = await app.enqueue_many(blocking.prepare() for _ in range(5))
    await burst(app, concurrency=6)
    for h in handles:
        assert await state_of(app, h) == JobState.SUCCEEDED


async def test_retries_back_off_on_the_injected_clock_then_die(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    app = clocked_app
    calls = 0

    @app.task(name="flaky", max_attempts=3, retry=RetryPolicy(base_s=10, jitter=False))
    async def flaky() -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError("upstream down")

    h = await flaky.aenqueue()
    await burst(app)
    job = await h.fetch()
    assert (calls, job.state, job.attempt) == (1, JobState.PENDING, 1)
    assert job.run_at == clock.now + timedelta(seconds=10)
    clock.advance(9)
    await burst(app)
    assert calls == 1
    clock.advance(1)
    await burst(app)
    job = await h.fetch()
    assert (calls, job.attempt, job.run_at) == (2, 2, clock.now + timedelta(seconds=20))
    clock.advance(20)
    await burst(app)
    job = await h.fetch()
    assert (calls, job.state, job.attempt) == (3, JobState.DEAD, 3)
    assert [e["attempt"] for e in job.errors] == [1, 2, 3]
    assert all("ConnectionError: upstream down" in e["message"] for e in job.errors)
    assert "Traceback" in job.errors[0]["traceback"]


async def test_flaky_job_succeeds_on_third_attempt(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    app = clocked_app

    @app.task(name="twice", retry=RetryPolicy(base_s=1, jitter=False))
    async def twice() -> None:
        if skiplock.current_job().attempt < 3:
            raise RuntimeError("not yet")

    h = await twice.aenqueue()
    for _ in range(3):
        await burst(app)
        clock.advance(5)
    job = await h.fetch()
    assert (job.state, job.attempt, len(job.errors)) == (JobState.SUCCEEDED, 3, 2)


async def test_retry_snooze_and_cancel(clocked_app: skiplock.App, clock: FakeClock) -> None:
    app = clocked_app

    @app.task(name="r")
    async def r() -> None:
        raise Retry(in_s=42)

    @app.task(name="z")
    async def z() -> None:
        raise Snooze(in_s=7)

    @app.task(name="c")
    async def c() -> None:
        raise Cancel("no longer needed")

    hr, hz, hc = await r.aenqueue(), await z.aenqueue(), await c.aenqueue()
    await burst(app)
    jr, jz, jc = await hr.fetch(), await hz.fetch(), await hc.fetch()
    assert (jr.state, jr.attempt, jr.run_at) == (
        JobState.PENDING,
        1,
        clock.now + timedelta(seconds=42),
    )
    assert (jz.state, jz.attempt, jz.errors) == (JobState.PENDING, 0, [])
    assert jz.run_at == clock.now + timedelta(seconds=7)
    assert jc.state is JobState.CANCELLED and "no longer needed" in jc.errors[-1]["message"]


async def test_permanent_errors_go_straight_to_dead(app: skiplock.App) -> None:
    @app.task(name="p", permanent=(ValueError,))
    async def p() -> None:
        raise ValueError("bad input")

    h = await p.aenqueue()
    await burst(app)
    job = await h.fetch()
    assert (job.state, job.attempt) == (JobState.DEAD, 1)


async def test_async_timeout_cancels_the_job(app: skiplock.App) -> None:
    @app.task(name="hang", timeout=0.2, max_attempts=1)
    async def hang() -> None:
        await asyncio.sleep(30)

    h = await hang.aenqueue()
    await burst(app)
    job = await h.fetch()
    assert job.state is JobState.DEAD
    assert "timed out after 0.2s" in job.errors[-1]["message"]


async def test_sync_timeout_frees_the_slot(app: skiplock.App) -> None:
    release = threading.Event()

    @app.task(name="stuck", timeout=0.2, max_attempts=1)
    def stuck() -> None:
        release.wait(10)

    @app.task(name="after")
    async def after() -> None:
        pass

    h = await stuck.aenqueue()
    h2 = await after.aenqueue()
    await burst(app, concurrency=1)
    release.set()
    job = await h.fetch()
    assert job.state is JobState.DEAD
    assert "cannot be killed" in job.errors[-1]["message"]
    assert await state_of(app, h2) == JobState.SUCCEEDED


async def test_unknown_task_goes_to_dead_and_the_worker_goes_on(app: skiplock.App) -> None:
    other = skiplock.App(app.url)
    ghost = other.task(name="ghost")(lambda: None)
    try:
        h = await ghost.aenqueue()

        @app.task(name="real")
        async def real() -> None:
            pass

        h2 = await real.aenqueue()
        await burst(app)
        job = await app.get_job(h.id)
        assert job.state is JobState.DEAD and job.attempt == 1
        assert "unknown task 'ghost'" in job.errors[-1]["message"]
        assert await state_of(app, h2) == JobState.SUCCEEDED
    finally:
        await other.close()


async def test_arguments_that_do_not_fit_go_to_dead(app: skiplock.App) -> None:
    @app.task(name="one")
    async def one(x: int) -> None:
        pass

    h = await one.using().aenqueue(1)
    # Enqueue refuses such a call; a row another producer (or older code) wrote still can.
    bad_row = dataclasses.replace(one.prepare(1), args_json="[]")
    bad = await app.enqueue_many([bad_row])
    await burst(app)
    assert await state_of(app, h) == JobState.SUCCEEDED
    job = await bad[0].fetch()
    assert job.state is JobState.DEAD and "arguments do not fit" in job.errors[-1]["message"]


@pytest.mark.parametrize(
    "exc",
    [SystemExit(2), KeyboardInterrupt(), GeneratorExit(), asyncio.CancelledError()],
    ids=["SystemExit", "KeyboardInterrupt", "GeneratorExit", "CancelledError"],
)
async def test_base_exceptions_fail_the_job_not_the_worker(
    app: skiplock.App, exc: BaseException
) -> None:
    @app.task(name="evil", max_attempts=1)
    async def evil() -> None:
        raise exc

    @app.task(name="evil_sync", max_attempts=1)
    def evil_sync() -> None:
        raise exc

    @app.task(name="fine")
    async def fine() -> None:
        pass

    hs = [await evil.aenqueue(), await fine.aenqueue()]
    if not isinstance(exc, asyncio.CancelledError):
        hs.append(await evil_sync.aenqueue())
    await burst(app)
    assert await state_of(app, hs[1]) == JobState.SUCCEEDED
    for h in hs[::2]:
        job = await h.fetch()
        assert job.state is JobState.DEAD
        assert type(exc).__name__ in job.errors[-1]["message"]


async def test_job_context_is_visible_to_async_and_sync_tasks(app: skiplock.App) -> None:
    seen: list[skiplock.JobContext] = []

    same: list[bool] = []

    @app.task(name="ctx_a", timeout=30)
    async def ctx_a() -> None:
        seen.append(skiplock.current_job())
        same.append(skiplock.current_job() is seen[-1])  # built once an attempt, then kept

    @app.task(name="ctx_s")
    def ctx_s() -> None:
        seen.append(skiplock.current_job())

    @app.task(name="ctx_st", timeout=20)
    def ctx_st() -> None:
        seen.append(skiplock.current_job())
        same.append(skiplock.current_job() is seen[-1])

    ha, hs = await ctx_a.aenqueue(), await ctx_s.using(queue="other").aenqueue()
    hst = await ctx_st.aenqueue()
    before = datetime.now(UTC)
    await burst(app)
    after = datetime.now(UTC)
    by_id = {c.id: c for c in seen}
    assert by_id[ha.id].task == "ctx_a" and by_id[ha.id].attempt == 1
    assert by_id[ha.id].max_attempts == 5 and by_id[ha.id].enqueued_at <= before
    # the deadline counts the timeout from the attempt's start (a sync one's: its thread's)
    deadline = by_id[ha.id].deadline
    assert deadline is not None and deadline.tzinfo is not None
    assert before + timedelta(seconds=30) <= deadline <= after + timedelta(seconds=30)
    deadline = by_id[hst.id].deadline
    assert deadline is not None
    assert before + timedelta(seconds=20) <= deadline <= after + timedelta(seconds=20)
    assert by_id[hs.id].queue == "other" and by_id[hs.id].deadline is None
    assert same == [True, True]
    with pytest.raises(LookupError):
        skiplock.current_job()


async def test_priority_runs_higher_first(app: skiplock.App) -> None:
    order: list[int] = []

    @app.task(name="p")
    async def p(n: int) -> None:
        order.append(n)

    for n in range(3):
        await p.using(priority=n).aenqueue(n)
    await burst(app, concurrency=1)
    assert order == [2, 1, 0]


async def test_queues_option_limits_what_a_worker_takes(app: skiplock.App) -> None:
    @app.task(name="q")
    async def q() -> None:
        pass

    ha, hb = await q.using(queue="a").aenqueue(), await q.using(queue="b").aenqueue()
    await burst(app, queues=("a",))
    assert await state_of(app, ha) == JobState.SUCCEEDED
    assert await state_of(app, hb) == JobState.PENDING


async def test_enqueue_many_inserts_every_job(app: skiplock.App) -> None:
    total = 0

    @app.task(name="add")
    async def add(n: int) -> None:
        nonlocal total
        total += n

    handles = await app.enqueue_many(add.prepare(n) for n in range(12_000))
    assert len({h.id for h in handles}) == 12_000
    await burst(app, concurrency=50)
    assert total == sum(range(12_000))


async def test_a_burst_runs_the_jobs_a_claim_passed_over_while_another_session_held_them(
    pg_url: str,
) -> None:
    """PostgreSQL's claim skips rows another session holds (its rotation moving a backlog to
    the long segment did: a burst of 12,000 ended with 2,050 pending). The burst's last claim
    comes up empty while two ready rows are held; the hold ends once it has: the burst runs
    them before it ends (it ended with both pending when a short claim was the end)."""

    app = skiplock.App(pg_url)
    await app.migrate()

    @app.task(name="t")
    async def t(n: int) -> None:
        pass

    handles = await app.enqueue_many(t.prepare(n) for n in range(5))
    schema = pg_url.rsplit("schema=", 1)[1]
    holder = await asyncpg.connect(PG_URL)
    held = [h.id for h in handles[:2]]
    await holder.execute("BEGIN")
    await holder.execute(
        f'SELECT 1 FROM "{schema}".skiplock_jobs WHERE id = ANY($1::bigint[]) FOR UPDATE', held
    )
    worker = Worker(app, poll_interval_s=0.05)
    claimed = worker.signals.claimed.arm()
    run = asyncio.create_task(worker.run(burst=True))
    try:
        while await claimed.wait():  # claims that took jobs, until one came up empty
            pass
        await holder.execute("ROLLBACK")
        await asyncio.wait_for(run, timeout=60)
        for handle in handles:
            assert await state_of(app, handle) == JobState.SUCCEEDED, handle.id
    finally:
        await holder.close()
        await app.close()


async def test_delayed_jobs_wait_for_run_after(clocked_app: skiplock.App, clock: FakeClock) -> None:
    app = clocked_app

    @app.task(name="later")
    async def later() -> None:
        pass

    h1 = await later.using(run_after=timedelta(seconds=60)).aenqueue()
    h2 = await later.using(run_after=clock.now + timedelta(seconds=30)).aenqueue()
    await burst(app)
    assert await state_of(app, h1) == await state_of(app, h2) == JobState.PENDING
    clock.advance(30)
    await burst(app)
    assert await state_of(app, h2) == JobState.SUCCEEDED
    assert await state_of(app, h1) == JobState.PENDING


async def test_worker_refuses_an_unmigrated_database(db_url: str) -> None:
    app = skiplock.App(db_url)
    try:
        with pytest.raises(skiplock.SchemaError, match="run `skiplock migrate"):
            await Worker(app).run(burst=True)
    finally:
        await app.close()


async def test_stop_releases_unfinished_jobs_to_pending(app: skiplock.App) -> None:
    started = asyncio.Event()

    @app.task(name="long")
    async def long() -> None:
        started.set()
        await asyncio.sleep(30)

    h = await long.aenqueue()
    worker = Worker(app, shutdown_timeout_s=0.2, poll_interval_s=0.05)
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 10)
    worker.request_stop()
    await asyncio.wait_for(run, 10)
    job = await h.fetch()
    assert (job.state, job.attempt, job.errors) == (JobState.PENDING, 0, [])


async def test_stop_is_seen_while_every_slot_is_busy(app: skiplock.App) -> None:
    started = asyncio.Event()

    @app.task(name="hog")
    async def hog() -> None:
        started.set()
        await asyncio.sleep(30)

    handles = await app.enqueue_many(hog.prepare() for _ in range(3))
    worker = Worker(app, concurrency=1, prefetch=0, shutdown_timeout_s=0.2, poll_interval_s=0.05)
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 10)
    worker.request_stop()  # the producer is waiting for a free slot, not for work
    await asyncio.wait_for(run, 10)
    assert {(await h.fetch()).state for h in handles} == {JobState.PENDING}


async def test_stop_lets_running_jobs_finish_within_the_grace(app: skiplock.App) -> None:
    started = asyncio.Event()

    @app.task(name="short")
    async def short() -> None:
        started.set()
        await asyncio.sleep(0.3)

    h = await short.aenqueue()
    worker = Worker(app, shutdown_timeout_s=10, poll_interval_s=0.05)
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 10)
    worker.request_stop()
    await asyncio.wait_for(run, 10)
    assert await state_of(app, h) == JobState.SUCCEEDED


async def test_an_enqueue_wakes_an_idle_worker_in_the_same_process(app: skiplock.App) -> None:
    done = asyncio.Event()

    @app.task(name="wake")
    async def wake() -> None:
        done.set()

    backend = await app.backend()
    backend.supports_push = False  # no NOTIFY, no data_version watch: only the in-process waker
    worker = Worker(app, poll_interval_s=60)  # and no poll within the wait below
    claimed, woke = worker.signals.claimed.arm(), worker.signals.woke.arm()
    run = asyncio.create_task(worker.run())
    assert await claimed.wait() == []  # idle: its first claim found nothing
    await wake.aenqueue()
    assert await woke.wait(timeout=10) == "default"
    await asyncio.wait_for(done.wait(), 10)
    worker.request_stop()
    await asyncio.wait_for(run, 10)


async def test_a_dying_service_stops_the_worker_loudly(app: skiplock.App) -> None:
    @app.task(name="any")
    async def any_job() -> None:
        pass

    await any_job.aenqueue()
    backend = await app.backend()

    async def broken(*_: object) -> list[int]:
        raise RuntimeError("completer bug")

    backend.job_set_state_if_running_many = broken  # type: ignore[method-assign]
    with pytest.raises(ExceptionGroup) as caught:
        await asyncio.wait_for(Worker(app, poll_interval_s=0.05).run(), 30)
    assert caught.group_contains(RuntimeError, match="completer bug")


async def test_outcomes_that_fail_to_write_are_retried_not_dropped(app: skiplock.App) -> None:
    @app.task(name="any")
    async def any_job() -> None:
        pass

    handle = await any_job.aenqueue()
    backend = await app.backend()
    real = backend.job_set_state_if_running_many
    failures = 0

    async def flaky(completions: object) -> list[int]:
        nonlocal failures
        if failures < 2:
            failures += 1
            raise skiplock.BackendUnavailable("database blinked")
        return await real(completions)  # type: ignore[arg-type]

    backend.job_set_state_if_running_many = flaky  # type: ignore[method-assign]
    await burst(app)
    assert failures == 2
    assert await state_of(app, handle) == JobState.SUCCEEDED


async def test_an_outcome_waiting_to_be_written_keeps_its_lease(app: skiplock.App) -> None:
    """While its outcome cannot be written (the database is away), a finished job's lease is
    still heartbeated, so no sweep hands the job to another run when the database is back.

    The lease is 3 s and heartbeats come every 0.5 s, so a loaded machine may stall the loop
    for 2 s without the lease lapsing; the writes are refused until two sweeps have run after
    the lease would have expired unrenewed."""
    runs = 0
    lease_s = 3.0

    @app.task(name="short_lease", visibility_timeout=lease_s)
    async def short_lease() -> None:
        nonlocal runs
        runs += 1

    handle = await short_lease.aenqueue()
    backend = await app.backend()
    real = backend.job_set_state_if_running_many
    worker = Worker(app, poll_interval_s=0.05, maintenance_interval_s=0.5)
    claimed, sweeps = worker.signals.claimed.arm(), worker.signals.reclaimed.arm()
    back = asyncio.Event()

    async def away(completions: object) -> list[int]:
        if not back.is_set():
            raise skiplock.BackendUnavailable("database away")
        return await real(completions)  # type: ignore[arg-type]

    async def come_back_after_two_sweeps_past_the_lease() -> None:
        await claimed.wait()
        lapsed = asyncio.get_running_loop().time() + lease_s
        past = 0
        while past < 2:
            await sweeps.wait()
            past += asyncio.get_running_loop().time() > lapsed
        back.set()

    backend.job_set_state_if_running_many = away  # type: ignore[method-assign]
    async with asyncio.TaskGroup() as tg:
        tg.create_task(come_back_after_two_sweeps_past_the_lease())
        await asyncio.wait_for(worker.run(burst=True), timeout=60)
    job = await handle.fetch()
    assert (runs, job.state, job.attempt) == (1, JobState.SUCCEEDED, 1)


async def test_cancelling_a_running_job_cancels_it_cooperatively(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    app = clocked_app
    started = asyncio.Event()

    @app.task(name="long_running")
    async def long_running() -> None:
        started.set()
        await asyncio.sleep(60)

    @app.task(name="never")
    async def never() -> None:
        raise AssertionError("a cancelled pending job must never run")

    running, pending = (
        await long_running.aenqueue(),
        await never.using(run_after=timedelta(seconds=2)).aenqueue(),
    )
    assert await app.cancel_job(pending.id, who="ops") is JobState.CANCELLED
    worker = Worker(app, poll_interval_s=0.05)
    flushed, claimed = worker.signals.flushed.arm(), worker.signals.claimed.arm()
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 10)
    assert await app.cancel_job(running.id, who="ops") is JobState.RUNNING
    while running.id not in await flushed.wait():
        pass
    assert await state_of(app, running) is JobState.CANCELLED
    clock.advance(3)  # past the pending job's run_after: the next claim must not take it
    claimed.drain()
    assert await claimed.wait() == await claimed.wait() == []  # the first may predate advance
    worker.request_stop()
    await asyncio.wait_for(run, 10)
    job = await running.fetch()
    assert "cancelled by request" in job.errors[-1]["message"]
    assert job.audit[-1]["who"] == "ops"
    assert await state_of(app, pending) is JobState.CANCELLED


async def test_a_worker_started_while_the_database_is_down_waits_for_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = skiplock.App("postgresql://postgres@127.0.0.1:1/test")  # nothing listens there
    worker = Worker(app, poll_interval_s=0.05)
    run = asyncio.create_task(worker.run())
    async with asyncio.timeout(30):  # until it failed, waited and failed again
        while caplog.text.count("database unavailable") < 2:
            assert not run.done(), "it must wait for the database, not exit"
            await asyncio.sleep(0.05)
    assert not run.done(), "it must wait for the database, not exit"
    worker.request_stop()
    await asyncio.wait_for(run, 30)  # and stop cleanly when asked
    await app.close()


async def test_a_burst_runs_a_retry_that_is_due_at_once(app: skiplock.App) -> None:
    """The burst's last claim came up short before the retry was written: it looks again."""
    attempts: list[int] = []

    @app.task(name="again")
    async def again() -> None:
        attempts.append(skiplock.current_job().attempt)
        if len(attempts) < 3:
            raise Retry(in_s=0)

    handle = await again.aenqueue()
    await burst(app)
    job = await handle.fetch()
    assert (job.state, attempts) == (JobState.SUCCEEDED, [1, 2, 3])


# -- the service model (issue 10 §2) and configuration (§4) -----------------------------------


async def test_a_running_worker_reports_each_service_ready_then_stopped(
    app: skiplock.App,
) -> None:
    worker = Worker(app, poll_interval_s=0.05)
    assert worker.status()["ready"] is False
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 30)
    status = worker.status()
    expected = {"completer", "executor", "lease-keeper", "rescuer", "canceller", "pruner"}
    expected |= {"watchdog", "presence", "log-summary", "wait-timer"}
    if app.url.startswith("postgresql"):
        # the live partition's dead versions: vacuums and segment rotations (SQLite leaves none)
        expected.add("vacuumer")
    else:  # the write-ahead log's checkpoints, and who holds them back
        expected.add("checkpointer")
    assert expected | {"notifier", "producer"} == set(status["services"])
    assert set(status["services"].values()) == {"ready"}
    worker.request_stop()
    worker.request_stop()  # a second request only shortens the drain; it must not break stop
    await asyncio.wait_for(run, 30)
    status = worker.status()
    assert status["ready"] is False and set(status["services"].values()) == {"stopped"}


async def test_a_stopped_worker_leaves_no_task_behind(app: skiplock.App) -> None:
    """Every background task, the breaker's trips included, is owned by the worker's group."""

    @app.task(name="bad", max_attempts=1, breaker=skiplock.Breaker(threshold=1))
    async def bad() -> None:
        raise ValueError("always")

    await bad.aenqueue()
    backend = await app.backend()
    real = backend.task_pause

    async def slow_pause(*args: object) -> None:
        await asyncio.sleep(0.5)  # the trip is still writing when the worker is asked to stop
        await real(*args)  # type: ignore[arg-type]

    backend.task_pause = slow_pause  # type: ignore[method-assign]
    before = asyncio.all_tasks()
    worker = Worker(app, poll_interval_s=0.05)
    flushed, tripped = worker.signals.flushed.arm(), worker.signals.breaker_tripped.arm()
    run = asyncio.create_task(worker.run())
    await flushed.wait()
    worker.request_stop()
    await asyncio.wait_for(run, 30)
    assert tripped.drain() == ["bad"], "the trip finished inside the worker's lifetime"
    assert asyncio.all_tasks() - before == set()


async def test_an_unarmed_signal_records_nothing() -> None:
    worker = Worker(skiplock.App("sqlite:///unused.db"))
    worker.signals.claimed.fire([1])
    assert worker.signals.claimed.drain() == []
    armed = worker.signals.claimed.arm()
    armed.fire([2])
    assert armed.drain() == [[2]]
    with pytest.raises(TimeoutError, match="claimed"):
        await armed.wait(timeout=0.01)


def test_worker_options_are_the_config_fields() -> None:
    fields = {f.name for f in dataclasses.fields(WorkerConfig)}
    assert set(WorkerOptions.__annotations__) == fields


def test_every_worker_duration_is_in_seconds_and_says_so() -> None:
    floats = {f.name for f in dataclasses.fields(WorkerConfig) if f.type == "float"}
    assert floats and all(name.endswith("_s") for name in floats)


def test_worker_keywords_override_the_config() -> None:
    app = skiplock.App("sqlite:///unused.db")
    worker = Worker(app, WorkerConfig(concurrency=3, name="w"), poll_interval_s=0.5)
    assert (worker.config.concurrency, worker.config.poll_interval_s) == (3, 0.5)
    with pytest.raises(TypeError):
        Worker(app, poll_interval=0.5)  # type: ignore[call-arg]
    with pytest.raises(skiplock.ConfigurationError, match=r"poll_interval_s=0"):
        Worker(app, poll_interval_s=0)


async def test_a_job_claimed_by_an_idle_worker_is_heartbeated_within_its_lease(
    app: skiplock.App,
) -> None:
    """Issue 9 item 5: an idle worker's lease keeper sleeps on a long interval (5 s, the
    maintenance interval, with nothing held); a job claimed then with a 1.5 s lease must be
    renewed within that lease, not after it lapsed and another worker took the job."""
    release = asyncio.Event()

    @app.task(name="short_lease", visibility_timeout=1.5)
    async def short_lease() -> None:
        await release.wait()

    worker = Worker(app, poll_interval_s=0.05)
    claimed, beats = worker.signals.claimed.arm(), worker.signals.heartbeat.arm()
    run = asyncio.create_task(worker.run())
    assert await claimed.wait() == []  # idle: the keeper is asleep on its long interval
    handle = await short_lease.aenqueue()
    while not await claimed.wait():
        pass
    assert await beats.wait(timeout=1.5) == 1  # renewed before the lease lapsed
    release.set()
    worker.request_stop()
    await asyncio.wait_for(run, 30)
    job = await handle.fetch()
    assert (job.state, job.attempt) == (JobState.SUCCEEDED, 1)


async def test_a_task_blocking_the_loop_is_named_with_the_lease_it_endangers(
    app: skiplock.App, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 9 item 13: while a handler blocks the event loop, a thread names its task."""

    @app.task(name="blocker", visibility_timeout=1.5)
    async def blocker() -> None:
        time.sleep(1.5)  # noqa: ASYNC251 - blocking code in an async handler: what it reports

    handle = await blocker.aenqueue()
    await burst(app)
    warnings = [r.getMessage() for r in caplog.records if "event loop blocked" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once per stall
    assert f"skiplock-job-{handle.id}" in warnings[0]
    assert f"shortest lease held (job {handle.id}, 1.5s)" in warnings[0]


async def _stop_with_outcomes_unwritable(
    app: skiplock.App, *, shutdown_timeout_s: float, stops: int
) -> skiplock.JobHandle:
    """A job finishes, its outcome cannot be written (the database is away for writes),
    then the worker is asked to stop ``stops`` times: it must return regardless."""

    @app.task(name="finished", visibility_timeout=5)
    async def finished() -> None:
        pass

    handle = await finished.aenqueue()
    backend = await app.backend()
    refused = asyncio.Event()

    async def away(completions: object) -> list[int]:
        refused.set()
        raise skiplock.BackendUnavailable("database away")

    backend.job_set_state_if_running_many = away  # type: ignore[method-assign]
    worker = Worker(app, poll_interval_s=0.05, shutdown_timeout_s=shutdown_timeout_s)
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(refused.wait(), 30)
    for _ in range(stops):
        worker.request_stop()
    await asyncio.wait_for(run, 10)  # before the fix: retried forever, never returned
    return handle


async def test_a_stop_ends_within_the_grace_even_when_outcomes_cannot_be_written(
    clocked_app: skiplock.App, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 9 item 9: the unwritten outcome's job stays leased, and is reclaimed later."""
    handle = await _stop_with_outcomes_unwritable(clocked_app, shutdown_timeout_s=0.5, stops=1)
    assert any("outcomes unwritten" in r.getMessage() for r in caplog.records)
    assert (await handle.fetch()).state is JobState.RUNNING  # still leased, not lost
    clock.advance(6)  # past its 5 s lease
    assert await (await clocked_app.backend()).job_reclaim_expired() == [handle.id]
    assert (await handle.fetch()).state is JobState.PENDING


async def test_a_second_stop_abandons_unwritable_outcomes_at_once(app: skiplock.App) -> None:
    loop = asyncio.get_running_loop()
    began = loop.time()
    await _stop_with_outcomes_unwritable(app, shutdown_timeout_s=60, stops=2)
    assert loop.time() - began < 10  # not the 60 s grace


async def test_a_lease_lost_while_running_cancels_the_local_attempt(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    app = clocked_app
    started, cancelled = asyncio.Event(), asyncio.Event()

    @app.task(name="held", visibility_timeout=1)
    async def held() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    handle = await held.aenqueue()
    worker = Worker(app, poll_interval_s=0.05, maintenance_interval_s=60, shutdown_timeout_s=0)
    lost = worker.signals.lease_lost.arm()
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 10)
    clock.advance(5)  # the lease lapses, and another worker's sweep takes the job
    assert await (await app.backend()).job_reclaim_expired() == [handle.id]
    # this worker's own next claim, or its next heartbeat, finds the old lease gone
    assert await lost.wait(timeout=10) == handle.id
    await asyncio.wait_for(cancelled.wait(), 10)
    worker.request_stop()
    await asyncio.wait_for(run, 10)
