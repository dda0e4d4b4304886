"""The scheduler on SQLite and PostgreSQL: one enqueue per slot, missed-run policies, overlap."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

import skiplock
from skiplock import ConfigurationError, Worker
from skiplock._backends import Backend
from skiplock._backends.params import CronSlotClaimParams
from skiplock._job import NewJob, SlotOutcome
from skiplock._worker.scheduler import Scheduler

T0 = datetime(2026, 1, 5, 11, 0, tzinfo=UTC)


def job() -> NewJob:
    return NewJob("t", "default", "[]", "{}", 0, 3)


async def claim_slot(
    backend: Backend, schedule: str, slot: datetime, job: NewJob, overlap: bool
) -> tuple[SlotOutcome, int | None]:
    return await backend.cron_slot_claim(CronSlotClaimParams(schedule, slot, job, overlap))


async def scheduler(app: skiplock.App) -> Scheduler:
    return Scheduler(app.registry, await app.backend())


async def test_slot_claim_is_once_per_slot_and_enqueues_in_the_same_transaction(
    app: skiplock.App,
) -> None:
    backend = await app.backend()
    first = await claim_slot(backend, "s", T0, job(), True)
    again = await claim_slot(backend, "s", T0, job(), True)
    other = await claim_slot(backend, "s", T0 + timedelta(minutes=5), job(), True)
    assert first[0] is SlotOutcome.ENQUEUED and first[1] is not None
    assert again == (SlotOutcome.TAKEN, None)
    assert other[0] is SlotOutcome.ENQUEUED
    assert (await app.counts())["pending"] == 2
    assert await backend.cron_last_slots() == {"s": T0 + timedelta(minutes=5)}


async def test_a_failed_enqueue_gives_the_slot_back(app: skiplock.App) -> None:
    backend = await app.backend()
    broken = NewJob("t", "default", "[]", "{}", 0, 0)  # max_attempts 0 violates a CHECK
    with pytest.raises(skiplock.BackendError):
        await claim_slot(backend, "s", T0, broken, True)
    assert await backend.cron_last_slots() == {}
    assert (await claim_slot(backend, "s", T0, job(), True))[0] is SlotOutcome.ENQUEUED


async def test_overlap_false_skips_while_the_previous_run_is_live(app: skiplock.App) -> None:
    backend = await app.backend()
    assert (await claim_slot(backend, "s", T0, job(), False))[0] is SlotOutcome.ENQUEUED
    skipped = await claim_slot(backend, "s", T0 + timedelta(minutes=1), job(), False)
    assert skipped == (SlotOutcome.SKIPPED, None)
    # once the previous run is finished, the next slot enqueues again
    await Worker(app, poll_interval_s=0.05, scheduler=False).run(burst=True)
    assert (await claim_slot(backend, "s", T0 + timedelta(minutes=2), job(), False))[
        0
    ] is SlotOutcome.ENQUEUED


async def test_prune_forgets_old_slots(app: skiplock.App) -> None:
    backend = await app.backend()
    await claim_slot(backend, "s", T0, job(), True)
    await claim_slot(backend, "s", T0 + timedelta(days=8), job(), True)
    assert await backend.cron_slots_prune(T0 + timedelta(days=1)) == 1
    assert await backend.cron_last_slots() == {"s": T0 + timedelta(days=8)}


@pytest.mark.parametrize(("missed", "expected"), [("skip", 0), ("latest", 1), ("all", 12)])
async def test_missed_policy_after_an_hour_down(
    app: skiplock.App, missed: str, expected: int
) -> None:
    @app.periodic("*/5 * * * *", missed=missed)  # type: ignore[arg-type]
    @app.task(name="every5")
    async def every5() -> None:
        pass

    first = await scheduler(app)
    await first.tick(T0)  # first start: nothing missed yet
    await first.tick(T0 + timedelta(seconds=1))
    await first.tick(T0 + timedelta(minutes=5, seconds=1))  # slot 11:05 enqueued on time
    before = (await app.counts())["pending"]
    assert before == 1
    # the scheduler is down from 11:05:01 to 12:07:30; a new one starts
    restarted = await scheduler(app)
    results = await restarted.tick(T0 + timedelta(hours=1, minutes=7, seconds=30))
    enqueued = [slot for _, slot, outcome in results if outcome is SlotOutcome.ENQUEUED]
    assert len(enqueued) == expected
    if expected:
        assert enqueued[-1] == T0 + timedelta(hours=1, minutes=5)
    assert (await app.counts())["pending"] == before + expected


async def test_latest_ignores_a_missed_slot_older_than_max_delay(app: skiplock.App) -> None:
    @app.periodic("0 * * * *", max_delay=60)
    @app.task(name="hourly")
    async def hourly() -> None:
        pass

    s = await scheduler(app)
    await s.tick(T0 + timedelta(seconds=1))
    restarted = await scheduler(app)
    assert await restarted.tick(T0 + timedelta(hours=2, minutes=30)) == []


async def test_slots_due_while_running_are_all_enqueued(app: skiplock.App) -> None:
    @app.periodic("* * * * *", missed="skip")
    @app.task(name="minutely")
    async def minutely() -> None:
        pass

    s = await scheduler(app)
    await s.tick(T0)
    # a stall of five minutes while running: every slot it passed is enqueued
    results = await s.tick(T0 + timedelta(minutes=5, seconds=10))
    assert [o for _, _, o in results] == [SlotOutcome.ENQUEUED] * 5


async def test_five_schedulers_racing_enqueue_each_slot_once(app: skiplock.App) -> None:
    @app.periodic("* * * * * *")  # every second
    @app.task(name="tick")
    async def tick(timestamp: int) -> None:
        pass

    schedulers = [await scheduler(app) for _ in range(5)]
    for s in schedulers:
        await s.tick(T0)
    for step in range(1, 31):
        now = T0 + timedelta(seconds=step, milliseconds=5)
        await asyncio.gather(*(s.tick(now) for s in schedulers))
    assert (await app.counts())["pending"] == 30
    jobs = await app.list_jobs(skiplock.JobState.PENDING, skiplock.JobFilter(limit=100))
    stamps = sorted(job.kwargs["timestamp"] for job in jobs)  # whatever ids they were given
    assert stamps == [int((T0 + timedelta(seconds=k)).timestamp()) for k in range(1, 31)]


async def test_the_task_receives_the_slot_when_it_asks(app: skiplock.App) -> None:
    seen: list[object] = []

    @app.periodic("*/5 * * * *", kwargs={"label": "x"})
    @app.task(name="stamped")
    async def stamped(label: str, timestamp: int, scheduled_at: str) -> None:
        seen.append((label, timestamp, scheduled_at))

    @app.periodic("*/5 * * * *")
    @app.task(name="plain")
    async def plain() -> None:
        seen.append("plain")

    s = await scheduler(app)
    await s.tick(T0)
    await s.tick(T0 + timedelta(minutes=5))
    await Worker(app, poll_interval_s=0.05, scheduler=False).run(burst=True)
    slot = T0 + timedelta(minutes=5)
    assert ("x", int(slot.timestamp()), slot.isoformat()) in seen
    assert "plain" in seen


async def test_a_task_taking_kwargs_receives_the_timestamp(app: skiplock.App) -> None:
    @app.periodic("*/5 * * * *")
    @app.task(name="anything")
    async def anything(**kwargs: object) -> None:
        pass

    s = await scheduler(app)
    await s.tick(T0)
    await s.tick(T0 + timedelta(minutes=5))
    (pending,) = await app.list_jobs(skiplock.JobState.PENDING, skiplock.JobFilter(limit=10))
    assert pending.kwargs == {"timestamp": int((T0 + timedelta(minutes=5)).timestamp())}


async def test_one_schedules_failing_slot_is_retried_and_the_others_go_on(
    app: skiplock.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot whose job cannot be built (a non-transient error of one schedule) no longer
    kills the scheduler: logged, retried for that schedule after 1 s, others enqueue."""
    from skiplock._schedule import Schedule

    @app.periodic("* * * * *", name="broken")
    @app.task(name="broken")
    async def broken() -> None:
        pass

    @app.periodic("* * * * *", name="fine")
    @app.task(name="fine")
    async def fine() -> None:
        pass

    original = Schedule.job_for
    failing = {"left": 1}

    def job_for(self: Schedule, slot: datetime) -> NewJob:
        if self.id == "broken" and failing["left"]:
            failing["left"] -= 1
            raise ValueError("this slot's job cannot be built")
        return original(self, slot)

    monkeypatch.setattr(Schedule, "job_for", job_for)
    s = await scheduler(app)
    await s.tick(T0)
    now = T0 + timedelta(minutes=1)
    assert [(n, o) for n, _, o in await s.tick(now)] == [("fine", SlotOutcome.ENQUEUED)]
    assert s.next_wake(now) == now + timedelta(seconds=1)  # the retry, before the next slot
    assert await s.tick(now + timedelta(milliseconds=500)) == []  # not yet
    retried = await s.tick(now + timedelta(seconds=1))
    assert [(n, slot, o) for n, slot, o in retried] == [("broken", now, SlotOutcome.ENQUEUED)]


async def test_schedule_with_queue_priority_and_name(app: skiplock.App) -> None:
    @app.task(name="report")
    async def report(kind: str) -> None:
        pass

    app.schedule(
        report, "0 * * * *", name="report-hourly", args=["hourly"], queue="reports", priority=7
    )
    app.schedule(report, "0 0 * * *", name="report-daily", args=["daily"])
    s = await scheduler(app)
    await s.tick(T0 - timedelta(seconds=1))
    await s.tick(T0)
    job_ = await app.get_job(1)
    assert (job_.queue, job_.priority, job_.args) == ("reports", 7, ["hourly"])


def test_declarations_are_validated() -> None:
    app = skiplock.App("sqlite:///unused.db")

    @app.task(name="t")
    async def t() -> None:
        pass

    with pytest.raises(ConfigurationError, match="minute field '61' out of range 0-59"):
        app.periodic("61 * * * *")(t)
    with pytest.raises(ConfigurationError, match="missed="):
        app.periodic("* * * * *", missed="sometimes")(t)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="tz="):
        app.periodic("* * * * *", tz="Nowhere/Land")(t)
    with pytest.raises(ConfigurationError, match=r"above @app\.task"):
        app.periodic("* * * * *")(lambda: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        app.periodic("* * * * *", args=[object()])(t)
    app.periodic("* * * * *")(t)
    with pytest.raises(ConfigurationError, match="pass name="):
        app.periodic("*/2 * * * *")(t)
    assert list(app.schedules) == ["t"]


async def test_worker_runs_the_scheduler_and_a_periodic_task_fires(app: skiplock.App) -> None:
    fired = asyncio.Event()

    @app.periodic("* * * * * *")
    @app.task(name="every_second")
    async def every_second() -> None:
        fired.set()

    worker = Worker(app, poll_interval_s=0.05)
    enqueued = worker.signals.slot_enqueued.arm()
    run = asyncio.create_task(worker.run())
    schedule_id, slot = await enqueued.wait(timeout=10)
    assert schedule_id == next(iter(app.schedules)) and slot.microsecond == 0
    await asyncio.wait_for(fired.wait(), 10)
    worker.request_stop()
    await asyncio.wait_for(run, 10)
    assert worker.scheduler is not None and worker.scheduler.lateness


async def test_a_dying_scheduler_stops_the_worker(app: skiplock.App) -> None:
    @app.periodic("* * * * * *")
    @app.task(name="boom")
    async def boom() -> None:
        pass

    backend = await app.backend()

    async def broken(*_: object) -> dict[str, datetime]:
        raise RuntimeError("scheduler bug")

    backend.cron_last_slots = broken  # type: ignore[method-assign]
    with pytest.raises(ExceptionGroup) as caught:
        await asyncio.wait_for(Worker(app, poll_interval_s=0.05).run(), 10)
    assert caught.group_contains(RuntimeError, match="scheduler bug")
