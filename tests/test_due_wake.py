"""An idle worker wakes when the next job comes due, not at its next poll (issue 20, defect 6).

The poll interval is set long (5 s) so that a worker waiting for its poll starts these jobs
late: its next claim comes a poll interval after the one that found the job not yet due, so
the start delay read from the row (its claim time minus the time it came due) is the poll
interval less the job's short delay (~4.7 s). Under half the interval means the worker woke at
the job's ``run_at``, with seconds to spare on a loaded machine.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import skiplock
from skiplock import Retry, Worker

from .helpers import FakeClock

POLL_S = 5.0


async def run_until_done(app: skiplock.App, handle: skiplock.JobHandle) -> skiplock.JobRecord:
    worker = Worker(app, poll_interval_s=POLL_S)
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(handle.result(), timeout=30)
    finally:
        worker.request_stop()
        await asyncio.wait_for(running, timeout=30)
    return await handle.fetch()


def start_delay(record: skiplock.JobRecord) -> float:
    """How long after it came due the job's last attempt was claimed (the database's clock)."""
    assert record.attempted_at is not None
    return (record.attempted_at - record.run_at).total_seconds()


async def test_a_short_retry_starts_at_its_delay_not_at_the_poll(app: skiplock.App) -> None:
    @app.task(name="flaky")
    async def flaky() -> None:
        if skiplock.current_job().attempt == 1:
            raise Retry(in_s=0.2)

    handle = await flaky.aenqueue()
    record = await run_until_done(app, handle)
    assert record.state is skiplock.JobState.SUCCEEDED
    assert record.attempt == 2
    assert start_delay(record) < POLL_S / 2


async def test_a_short_run_after_starts_at_its_time_not_at_the_poll(app: skiplock.App) -> None:
    @app.task(name="later")
    async def later() -> None:
        pass

    handle = await later.using(run_after=timedelta(seconds=0.3)).aenqueue()
    record = await run_until_done(app, handle)
    assert record.state is skiplock.JobState.SUCCEEDED
    assert start_delay(record) < POLL_S / 2


async def test_the_next_due_job_is_read_from_the_database(app: skiplock.App) -> None:
    @app.task(name="t")
    async def t() -> None:
        pass

    backend = await app.backend()
    assert await backend.job_next_run_at() is None
    await t.aenqueue()  # due now: not "next"
    await t.using(run_after=timedelta(hours=1), priority=5).aenqueue()
    await t.using(run_after=timedelta(seconds=60), priority=-3).aenqueue()
    due_in = await backend.job_next_run_at()
    assert due_in is not None and 0 < due_in <= 60


async def test_a_job_due_since_the_short_claim_began_is_not_missed(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    """The race CI's load once showed (the job came due between the worker's short claim and
    its read of the next due job; the read looked only past now, saw nothing and the worker
    slept a whole poll interval): asked with the time since the claim began, a job that came
    due in between answers <= 0, so the worker claims again at once; without it, None."""

    @clocked_app.task(name="t")
    async def t() -> None:
        pass

    backend = await clocked_app.backend()
    await t.using(run_after=timedelta(seconds=1)).aenqueue()
    clock.advance(2)  # the short claim ran at 0; the job came due at 1; this read runs at 2
    assert await backend.job_next_run_at() is None
    due_in = await backend.job_next_run_at(lookback_s=3)
    assert due_in is not None and -1.5 < due_in <= -0.5
    # a job due before the claim began was seen by that claim (unclaimable: paused, limited):
    # it must not answer, or an idle worker would claim in a loop
    assert await backend.job_next_run_at(lookback_s=0.5) is None


async def test_a_notice_during_the_claim_is_claimed_at_once_without_the_due_probe(
    app: skiplock.App,
) -> None:
    """A steady flow, as a worker at its defaults meets it: each claim comes back short and
    the next job's notice is already in when it does. The worker claims again at once; asking
    the database when the next job comes due would only delay that claim (under readers that
    fill the CPU it cost a round trip of milliseconds for every job)."""

    @app.task(name="t")
    async def t() -> None:
        pass

    backend = await app.backend()
    worker = Worker(app, poll_interval_s=POLL_S)
    woke = worker.signals.woke.arm()
    calls: list[str] = []
    second: list[skiplock.JobHandle] = []
    real_claim, real_next = backend.job_get_available, backend.job_next_run_at

    async def claim(params: Any) -> list[Any]:
        rows = await real_claim(params)
        calls.append(f"claim {len(rows)}")
        if rows and not second:  # the claim that took the first job: the next comes meanwhile
            second.append(await t.aenqueue())
            await woke.wait(timeout=30)
        return rows

    async def next_run_at(*args: Any, **kwargs: Any) -> float | None:
        calls.append("due probe")
        return await real_next(*args, **kwargs)

    backend.job_get_available = claim  # type: ignore[method-assign]
    backend.job_next_run_at = next_run_at  # type: ignore[method-assign]
    first = await t.aenqueue()
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(first.result(), timeout=30)
        assert second, calls  # enqueued inside the claim that took the first
        await asyncio.wait_for(second[0].result(), timeout=30)
    finally:
        worker.request_stop()
        await asyncio.wait_for(running, timeout=30)
    took_first = calls.index("claim 1")
    assert calls[took_first + 1] == "claim 1", calls
