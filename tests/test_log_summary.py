"""Logging at the default level costs a line an interval, not a line a job (issue 24): a job's
routine events (started, succeeded, snoozed, released) log at DEBUG; at INFO a worker logs one
summary line every ``log_summary_interval_s`` (and one at its stop for the part interval),
its counts read from the same meter ``/metrics`` exports; failures keep a line each."""

from __future__ import annotations

import asyncio
import logging

import pytest

import skiplock
from skiplock import Worker
from skiplock._job import Completion, Disposition
from skiplock._observe.meter import Meter
from skiplock._observe.summary import LogSummary, Totals, summarize


def summaries(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [
        dict(r.summary)  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "event", None) == "summary"
    ]


def written(meter: Meter, *outcomes: tuple[Disposition, float | None]) -> None:
    batch = [Completion(0, "", d, run_s=run_s, queue="default", task="t") for d, run_s in outcomes]
    meter.written(batch, lag_s=0.001)


def test_a_summary_is_the_difference_of_two_readings() -> None:
    meter = Meter()
    meter.start("default", "t")
    written(meter, (Disposition.SUCCEED, 0.5))
    before = Totals.read(meter)
    for _ in range(3):
        meter.start("default", "t")
    written(meter, (Disposition.SUCCEED, 0.2), (Disposition.SUCCEED, 0.4))
    written(meter, (Disposition.DEAD, 0.3), (Disposition.RELEASE, None))
    meter.reclaim(2)
    summary = summarize(before, Totals.read(meter), 10.0, running=1, claimed_ahead=4)
    fields = summary.fields()
    assert (fields["started"], fields["succeeded"], fields["dead"], fields["released"]) == (
        3,
        2,
        1,
        1,
    )
    assert fields["retried"] == 0 and fields["reclaimed"] == 2
    assert fields["jobs_per_s"] == 0.4  # four outcomes in 10 s
    assert fields["mean_run_s"] == pytest.approx(0.3)  # the release ran nothing
    assert (fields["running"], fields["claimed_ahead"]) == (1, 4)
    assert summary.message() == (
        "last 10s: 3 started, 4 ended (2 succeeded, 1 released, 1 dead; 0.4/s, mean run "
        "0.300s); reclaimed 2 expired leases; now 1 running, 4 claimed ahead"
    )
    assert not summary.quiet
    idle = summarize(Totals.read(meter), Totals.read(meter), 60.0, running=0, claimed_ahead=0)
    assert idle.quiet and idle.mean_run_s is None


def test_an_idle_interval_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    meter = Meter()
    service = LogSummary(meter, 60.0, lambda: (0, 0), "w")
    assert service.log_once().quiet and not summaries(caplog)
    meter.start("default", "t")
    assert not service.log_once().quiet
    assert summaries(caplog)[0]["started"] == 1  # counted once: the next line starts afresh
    assert service.log_once().quiet and len(summaries(caplog)) == 1


async def test_at_info_a_worker_logs_a_summary_and_no_line_a_job(
    app: skiplock.App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)

    @app.task(name="ok")
    async def ok(n: int) -> int:
        return n

    @app.task(name="bad", max_attempts=1)
    async def bad() -> None:
        raise ValueError("no")

    await app.enqueue_many(ok.prepare(n) for n in range(5))
    failing = await bad.aenqueue()
    await Worker(app, log_summary_interval_s=3600.0).run(burst=True)

    jobs = [r for r in caplog.records if r.name == "skiplock.jobs"]
    assert [(r.levelno, getattr(r, "event", None)) for r in jobs] == [(logging.ERROR, "dead")]
    assert jobs[0].job_id == failing.id  # type: ignore[attr-defined]
    (summary,) = summaries(caplog)  # the stop's line: the interval never came round
    assert (summary["started"], summary["succeeded"], summary["dead"]) == (6, 5, 1), summary


async def test_at_debug_every_job_logs_its_events(
    app: skiplock.App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="skiplock.jobs")

    @app.task(name="ok")
    async def ok() -> None:
        pass

    handles = [await ok.aenqueue() for _ in range(3)]
    await Worker(app).run(burst=True)
    for handle in handles:
        got = [
            (r.levelno, getattr(r, "event", None))
            for r in caplog.records
            if getattr(r, "job_id", None) == handle.id
        ]
        assert got == [(logging.DEBUG, "started"), (logging.DEBUG, "succeeded")]


class _Summaries(logging.Handler):
    """Wakes the test's loop on each summary record: the test waits on it, not on a clock."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(logging.INFO)
        self.loop = loop
        self.seen: asyncio.Queue[dict[str, object]] = asyncio.Queue()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == "summary":
            self.loop.call_soon_threadsafe(self.seen.put_nowait, dict(record.summary))  # type: ignore[attr-defined]


async def test_the_summary_comes_every_interval(app: skiplock.App) -> None:
    @app.task(name="ok")
    async def ok() -> None:
        pass

    handler = _Summaries(asyncio.get_running_loop())
    logger = logging.getLogger("skiplock.worker")
    logger.addHandler(handler)
    was = logger.level
    logger.setLevel(logging.INFO)
    worker = Worker(app, log_summary_interval_s=0.05)
    running = asyncio.create_task(worker.run())
    try:
        handle = await ok.aenqueue()
        await asyncio.wait_for(handle.result(), 30)
        ended = 0
        while ended == 0:  # the lines before the outcome was written count nothing ended
            line = await asyncio.wait_for(handler.seen.get(), 30)
            ended = int(str(line["succeeded"]))
        assert ended == 1 and 0 < float(str(line["interval_s"])) < 30
    finally:
        worker.request_stop()
        await asyncio.wait_for(running, 30)
        logger.removeHandler(handler)
        logger.setLevel(was)


@pytest.mark.parametrize("interval_s", [0.0, 60.0])
async def test_zero_turns_the_summary_off(
    app: skiplock.App, caplog: pytest.LogCaptureFixture, interval_s: float
) -> None:
    caplog.set_level(logging.INFO)

    @app.task(name="ok")
    async def ok() -> None:
        pass

    worker = Worker(app, log_summary_interval_s=interval_s)
    ready = worker.signals.ready.arm()
    running = asyncio.create_task(worker.run())
    try:
        await ready.wait_for("worker")
        assert ("log-summary" in worker.status()["services"]) is (interval_s > 0)
        await asyncio.wait_for((await ok.aenqueue()).result(), 30)
    finally:
        worker.request_stop()
        await asyncio.wait_for(running, 30)
    assert bool(summaries(caplog)) is (interval_s > 0)  # the stop's line, or none
