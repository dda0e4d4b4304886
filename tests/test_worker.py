"""Worker behaviour, on SQLite and PostgreSQL, in burst mode (run until nothing is ready)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from datetime import timedelta

import pytest

import skiplock
from skiplock import Cancel, JobState, Retry, RetryPolicy, Snooze, Worker

from .helpers import FakeClock


async def burst(app: skiplock.App, **options: object) -> Worker:
    worker = Worker(app, poll_interval=0.05, **options)  # type: ignore[arg-type]
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

    @app.task(name="ctx_a", timeout=30)
    async def ctx_a() -> None:
        seen.append(skiplock.current_job())

    @app.task(name="ctx_s")
    def ctx_s() -> None:
        seen.append(skiplock.current_job())

    ha, hs = await ctx_a.aenqueue(), await ctx_s.using(queue="other").aenqueue()
    await burst(app)
    by_id = {c.id: c for c in seen}
    assert by_id[ha.id].task == "ctx_a" and by_id[ha.id].attempt == 1
    assert by_id[ha.id].deadline is not None
    assert by_id[hs.id].queue == "other" and by_id[hs.id].deadline is None
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
    worker = Worker(app, shutdown_timeout=0.2, poll_interval=0.05)
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
    worker = Worker(app, concurrency=1, prefetch=0, shutdown_timeout=0.2, poll_interval=0.05)
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
    worker = Worker(app, shutdown_timeout=10, poll_interval=0.05)
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

    worker = Worker(app, poll_interval=60)  # only a wake-up can make this prompt
    run = asyncio.create_task(worker.run())
    await asyncio.sleep(0.3)
    await wake.aenqueue()
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
        await asyncio.wait_for(Worker(app, poll_interval=0.05).run(), 30)
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
    still heartbeated, so no sweep hands the job to another run when the database is back."""
    runs = 0

    @app.task(name="short_lease", visibility_timeout=1)
    async def short_lease() -> None:
        nonlocal runs
        runs += 1

    handle = await short_lease.aenqueue()
    backend = await app.backend()
    real = backend.job_set_state_if_running_many
    loop = asyncio.get_running_loop()
    refuse_until: float | None = None

    async def away(completions: object) -> list[int]:
        nonlocal refuse_until
        if refuse_until is None:
            refuse_until = loop.time() + 3  # three leases long
        if loop.time() < refuse_until:
            raise skiplock.BackendUnavailable("database away")
        return await real(completions)  # type: ignore[arg-type]

    backend.job_set_state_if_running_many = away  # type: ignore[method-assign]
    await burst(app, maintenance_interval=0.2)
    job = await handle.fetch()
    assert (runs, job.state, job.attempt) == (1, JobState.SUCCEEDED, 1)


async def test_cancelling_a_running_job_cancels_it_cooperatively(app: skiplock.App) -> None:
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
    worker = Worker(app, poll_interval=0.05)
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 10)
    assert await app.cancel_job(running.id, who="ops") is JobState.RUNNING
    deadline = asyncio.get_running_loop().time() + 10
    while await state_of(app, running) is not JobState.CANCELLED:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.1)
    await asyncio.sleep(2.5)  # past the pending job's run_after
    worker.request_stop()
    await asyncio.wait_for(run, 10)
    job = await running.fetch()
    assert "cancelled by request" in job.errors[-1]["message"]
    assert job.audit[-1]["who"] == "ops"
    assert await state_of(app, pending) is JobState.CANCELLED


async def test_a_worker_started_while_the_database_is_down_waits_for_it() -> None:
    app = skiplock.App("postgresql://postgres@127.0.0.1:1/test")  # nothing listens there
    worker = Worker(app, poll_interval=0.05)
    run = asyncio.create_task(worker.run())
    await asyncio.sleep(1.5)
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
