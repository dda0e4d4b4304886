"""Defects the semantics test found that issue 42 does not list, each as a user meets it, on
both databases, each fixed (a new finding not fixed yet is added as a strict xfail, which its
fix turns into a plain test). ``tests/model/checks.py`` gates the machine's rules that reach
them."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import skiplock
from skiplock import SignalOutcome, Worker, current_job

from ..helpers import FakeClock


async def test_a_parked_job_keeps_its_unique_key_and_resumes(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    """Before: a parked job gave its key up, a second enqueue wrote a new job holding it, and
    the parked one could never resume (``app.signal`` raised ``DuplicateJob``)."""
    app = clocked_app

    @app.task(name="approve_order", unique_key=lambda order: f"order:{order}")
    async def approve_order(order: int) -> str:
        return await current_job().wait_for("approved", timeout=30)

    first = await approve_order.aenqueue(7)
    await app.drain()  # parked on "approved": it keeps its key, as a running job does
    later = approve_order.using(run_after=timedelta(hours=1))
    second = await later.aenqueue(7)  # on_conflict="keep": the parked job's handle
    assert second.id == first.id
    receipt = await app.signal(first.id, "approved", "ann")
    assert receipt.outcome is SignalOutcome.DELIVERED
    assert (await approve_order.aenqueue(7)).id == first.id  # resumed: pending, still its key
    await app.drain()
    assert await first.result(timeout=5) == "ann"
    assert (await approve_order.aenqueue(7)).id != first.id  # it finished: the key is free


async def test_a_worker_survives_the_timeout_of_such_a_wait(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    """Before: the wait's timeout met the key another job took, and the DuplicateJob it
    raised ended the worker (it left the TaskGroup). Now the parked job still holds its key:
    its timeout resumes it, and the worker goes on."""
    app = clocked_app

    @app.task(name="approve_order", unique_key=lambda order: f"order:{order}")
    async def approve_order(order: int) -> str:
        try:
            return await current_job().wait_for("approved", timeout=30)
        except skiplock.SignalTimeout:
            return "timed out"

    first = await approve_order.aenqueue(7)
    await app.drain()
    again = await approve_order.using(run_after=timedelta(hours=1)).aenqueue(7)
    assert again.id == first.id
    clock.advance(31)  # the wait times out at the worker's start
    worker = Worker(app, maintenance_interval_s=0.05)
    running = asyncio.create_task(worker.run())
    try:
        done, _ = await asyncio.wait(
            [asyncio.ensure_future(first.result(timeout=10)), running],
            return_when=asyncio.FIRST_COMPLETED,
        )
        assert running not in done  # the worker still runs
        assert await first.result(timeout=1) == "timed out"
    finally:
        worker.request_stop()
        await asyncio.wait_for(running, 30)


async def test_a_batch_counts_a_pruned_member_as_gone(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    app = clocked_app

    @app.task(name="resize")
    async def resize(image: int) -> None: ...

    @app.task(name="zip_them")
    async def zip_them(batch_id: int) -> None: ...

    async with app.batch(on_complete=zip_them.s()) as batch:
        await resize.aenqueue(1)
        await resize.using(run_after=timedelta(days=8)).aenqueue(2)
    await app.drain()  # the first image is done; the second comes due in 8 days
    clock.advance(7 * 86400 + 60)
    await app.prune(finished_age_s=7 * 86400, dead_age_s=30 * 86400)  # the default retention
    info = await batch.info()
    assert info.counts == {"gone": 1, "pending": 1}  # BatchInfo.counts: "gone: pruned"


async def test_weighted_keys_back_after_idling_take_their_turns(app: skiplock.App) -> None:
    order: list[str] = []

    @app.task(name="export", concurrency_key=lambda tenant, n: tenant)
    async def export(tenant: str, n: int) -> None:
        order.append(tenant)

    enterprise = export.using(key_weight=3)  # three jobs a turn
    for _ in range(2):  # the second time, both keys come back after they ran out of work
        order.clear()
        await app.enqueue_many([enterprise.prepare("acme", n) for n in range(9)])
        await app.enqueue_many([export.prepare("bob", n) for n in range(6)])
        await Worker(app, concurrency=1).run(burst=True)
        assert order[:8] == ["acme"] * 3 + ["bob"] + ["acme"] * 3 + ["bob"]
