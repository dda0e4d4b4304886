"""The default lease of a task without a timeout is short, since heartbeats extend it
(issue 20, defect 7): a worker killed without a supervisor frees its jobs within a minute,
not 330 s, and the lease keeper beats several times within the lease."""

from __future__ import annotations

import asyncio

import skiplock
from skiplock import Worker, WorkerConfig, current_job
from skiplock._worker.leases import LeaseKeeper

from .helpers import await_until


def test_the_default_lease_is_tens_of_seconds() -> None:
    config = WorkerConfig()
    assert config.default_lease_s + config.lease_margin_s <= 60.0


async def test_a_job_without_a_timeout_is_leased_briefly_and_renewed_well_within_it(
    app: skiplock.App,
) -> None:
    leased: list[float] = []
    release = asyncio.Event()

    @app.task(name="untimed")
    async def untimed() -> None:
        job = current_job()
        row = await app.get_job(job.id)
        assert row.attempted_at is not None
        leased.append((job.lease_expires_at - row.attempted_at).total_seconds())
        await release.wait()

    handle = await untimed.aenqueue()
    worker = Worker(app)
    started = worker.signals.started.arm()
    running = asyncio.create_task(worker.run())
    try:
        await started.wait()
        keeper = next(s for s in worker._services if isinstance(s, LeaseKeeper))
        (lease,) = await await_until(lambda: leased, "the job to read its lease")
        assert lease <= 60.0
        # two beats can fail before the lease lapses, with room to spare
        assert keeper.interval_s() <= lease / 6
    finally:
        release.set()
        await asyncio.wait_for(handle.result(), 30)
        worker.request_stop()
        await asyncio.wait_for(running, 30)
