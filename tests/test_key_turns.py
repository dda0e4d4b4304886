"""Turns between concurrency keys in the steady state (issue 42): ``key_weight`` and
``fair=False`` hold when slots free one at a time (a ``--concurrency 1`` worker), not only
inside one claim's batch, on both databases, the real CLI worker included; an ordered key
keeps its turn while its job is parked on a signal; the turn rows of keys with nothing left
are pruned."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import skiplock
from skiplock._worker.worker import Worker

MEASURED = 80
"""Starts counted after the first claim's: 20 whole turns of a weight-3 and a weight-1 key."""


async def _starts_at_concurrency_1(app: skiplock.App, jobs: list[Any]) -> list[str]:
    """The keys of the first ``MEASURED`` jobs a ``concurrency=1`` worker starts after its
    first claim's, jobs of 1 to 4 ms."""
    started: list[tuple[int, str]] = []
    enough = asyncio.Event()

    @app.task(name="work", concurrency_key=lambda tenant, n: tenant)
    async def work(tenant: str, n: int) -> None:
        started.append((skiplock.current_job().id, tenant))
        if len(started) > MEASURED + 4:
            enough.set()
        await asyncio.sleep((n % 4 + 1) / 1000)  # the job's own work: 1 to 4 ms

    await app.enqueue_many([work.using(**opts).prepare(tenant, n) for tenant, n, opts in jobs])
    worker = Worker(app, concurrency=1, scheduler=False)
    claimed = worker.signals.claimed.arm()
    run = asyncio.create_task(worker.run())
    try:
        first: list[int] = []
        while not first:  # a claim before the jobs were seen comes back empty
            first = await claimed.wait()
        await asyncio.wait_for(enough.wait(), 60)
    finally:
        worker.request_stop()
        await asyncio.wait_for(run, 30)
    return [tenant for job_id, tenant in started if job_id not in first][:MEASURED]


def _ratio(starts: list[str], heavy: str, light: str) -> float:
    counted = collections.Counter(starts)
    assert counted[heavy] + counted[light] == len(starts), counted
    return counted[heavy] / max(counted[light], 1)


async def test_a_weight_3_key_gets_three_starts_to_one_at_concurrency_1(
    app: skiplock.App,
) -> None:
    """Both keys backlogged, slots freeing one at a time: a key of weight 3 takes three jobs
    for the other's one, claim after claim (a weight lived only inside one claim's batch:
    40 starts to 40)."""
    jobs = [(tenant, n, {"key_weight": 3} if tenant == "heavy" else {})
            for n in range(100) for tenant in ("heavy", "light")]  # fmt: skip
    starts = await _starts_at_concurrency_1(app, jobs)
    assert 2.7 <= _ratio(starts, "heavy", "light") <= 3.3, collections.Counter(starts)


async def test_a_fair_false_keys_older_jobs_go_first_at_concurrency_1(app: skiplock.App) -> None:
    """``fair=False``: the key's jobs are always in the current turn, claimed by age beside
    the jobs whose turn it is, as a queue without keys claims them: its older backlog runs
    before another key's newer jobs instead of taking turns with them."""
    jobs = [("bulk", n, {"fair": False}) for n in range(60)]
    jobs += [("tenant", n, {}) for n in range(60)]
    starts = await _starts_at_concurrency_1(app, jobs)
    assert starts[:50] == ["bulk"] * 50, collections.Counter(starts[:50])


async def test_an_ordered_keys_next_job_waits_while_the_one_before_is_parked(
    app: skiplock.App,
) -> None:
    """An order's payment waits for a signal (``wait_for``): its shipping, the key's next job,
    starts only once the payment has finished, after the signal came (the parked job used to
    give its key's turn away: the shipping ran and finished first)."""
    events: list[str] = []
    probed = asyncio.Event()

    @app.task(name="fulfil", ordering_key=lambda order, step: f"order:{order}")
    async def fulfil(order: int, step: str) -> None:
        events.append(f"{step} start")
        if step == "charge":
            await skiplock.current_job().wait_for("paid", timeout=60)
        events.append(f"{step} done")

    @app.task(name="probe", concurrency_key="another")
    async def probe() -> None:
        probed.set()

    charge = await fulfil.aenqueue(1, "charge")
    ship = await fulfil.aenqueue(1, "ship")
    worker = Worker(app, poll_interval_s=60, scheduler=False)
    flushed = worker.signals.flushed.arm()
    run = asyncio.create_task(worker.run())
    try:
        while charge.id not in await flushed.wait():  # the charge parked (its outcome written)
            pass
        await probe.aenqueue()  # a keyed claim after the park: it takes the probe alone
        await asyncio.wait_for(probed.wait(), 30)
        assert events == ["charge start"]
        await app.signal(charge.id, "paid")
        await ship.result(timeout=30)
    finally:
        worker.request_stop()
        await asyncio.wait_for(run, 30)
    assert events == ["charge start", "charge start", "charge done", "ship start", "ship done"]


async def test_weighted_keys_take_their_turns_afresh_round_after_round(app: skiplock.App) -> None:
    """Two keys (weights 3 and 1) run out of work and come back, three times: each time they
    take turns as new keys do, three to one from the first start (a key's turns end with its
    last live job, migration 25: the weight-3 key, left behind the other's pass by the round
    before, started six of its jobs in a row the next time)."""
    order: list[str] = []

    @app.task(name="export", concurrency_key=lambda tenant, n: tenant)
    async def export(tenant: str, n: int) -> None:
        order.append(tenant)

    enterprise = export.using(key_weight=3)
    for heavy, light in ((9, 6), (6, 5), (12, 2)):  # each round leaves the passes apart
        order.clear()
        await app.enqueue_many([enterprise.prepare("acme", n) for n in range(heavy)])
        await app.enqueue_many([export.prepare("bob", n) for n in range(light)])
        await Worker(app, concurrency=1, scheduler=False).run(burst=True)
        assert order[:8] == ["acme"] * 3 + ["bob"] + ["acme"] * 3 + ["bob"], order


async def test_a_key_back_from_idle_while_another_ran_takes_three_to_one(
    app: skiplock.App,
) -> None:
    """A weight-3 key runs out of work while a weight-1 key keeps running alone; back with
    work, it takes its turn at once and then three starts to the other's one: no more than
    a turn's three in a row, whatever it took before it went idle."""
    order: list[str] = []

    @app.task(name="export", concurrency_key=lambda tenant, n: tenant)
    async def export(tenant: str, n: int) -> None:
        order.append(tenant)
        if tenant == "bob" and n == 8:  # bob has run alone a while: acme is back
            await app.enqueue_many([enterprise.prepare("acme", m) for m in range(9)])

    enterprise = export.using(key_weight=3)
    await app.enqueue_many([enterprise.prepare("acme", n) for n in range(3)])
    await app.enqueue_many([export.prepare("bob", n) for n in range(20)])
    await Worker(app, concurrency=1, prefetch=0, scheduler=False).run(burst=True)
    back = order.index("bob", order.index("bob") + 8) + 1  # the start after bob's n == 8
    assert order[:back] == ["acme"] * 3 + ["bob"] * 9, order
    assert "".join(t[0] for t in order[back : back + 12]) == "aaabaaabaaab", order
