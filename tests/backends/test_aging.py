"""Priority aging (issue 25): a queue's ``aging_s`` ranks its ready jobs by ``priority +
floor(wait / aging_s)``, ties by run_at then id; and a reclaimed job keeps its place.

Time is the injected clock: a job's run_at is the clock when it was enqueued, so a wait is a
clock advance, never a sleep.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

import skiplock
from skiplock._backends import Backend
from skiplock._backends.params import JobInsertManyParams, QueueSetLimitsParams
from skiplock._backends.sqlite.statements import STATEMENTS as sql

from ..helpers import FakeClock
from .helpers import claim, new_job

AGING = 10.0


async def enqueue(backend: Backend, priority: int, n: int = 1, queue: str = "aged") -> list[int]:
    jobs = [new_job(queue=queue, priority=priority) for _ in range(n)]
    return await backend.job_insert_many(JobInsertManyParams(jobs))


async def take(backend: Backend, limit: int = 1, queue: str = "aged") -> list[int]:
    """One claim of ``queue`` through its own (locked) claim, as a worker runs it."""
    jobs = await backend.job_get_available_limited(claim(limit, (queue,)))
    return [job.id for job in jobs]


async def ages(backend: Backend, aging_s: float | None, queue: str = "aged") -> None:
    await backend.queue_set_limits(QueueSetLimitsParams(queue, aging_s=aging_s))


@pytest.mark.parametrize(
    ("low_wait", "high_priority", "high_wait", "low_first"),
    [
        (9.9, 1, 0.0, False),  # one step short of a fresh job one priority up
        (10.0, 1, 0.0, True),  # one step: a tie, and the older goes first
        (19.9, 2, 0.0, False),
        (20.0, 2, 0.0, True),
        (10.0, 1, 10.0, False),  # the higher one aged as much: still ahead
        (25.0, 2, 5.0, True),  # 0 + 2 against 2 + 0: the older of the tie
        (29.9, 3, 0.0, False),
        (40.0, 3, 9.9, True),  # 0 + 4 against 3 + 0
        (1000.0, 100, 0.0, True),
        (999.0, 100, 0.0, False),
    ],
)
async def test_the_aging_rule_at_its_edges(
    backend: Backend,
    clock: FakeClock,
    low_wait: float,
    high_priority: int,
    high_wait: float,
    low_first: bool,
) -> None:
    """A priority-0 job that waited ``low_wait`` against one of ``high_priority`` that waited
    ``high_wait``, aging one step per 10 s: which the claim takes first."""
    await ages(backend, AGING)
    (low,) = await enqueue(backend, 0)
    clock.advance(low_wait - high_wait)
    (high,) = await enqueue(backend, high_priority)
    clock.advance(high_wait)
    assert await take(backend) == ([low] if low_first else [high])


async def test_without_aging_the_higher_priority_always_goes_first(
    backend: Backend, clock: FakeClock
) -> None:
    (low,) = await enqueue(backend, 0)
    clock.advance(1_000_000)
    (high,) = await enqueue(backend, 1)
    assert [j.id for j in await backend.job_get_available(claim(1, ("aged",)))] == [high]
    await ages(backend, AGING)  # the same rows, ranked with aging
    await enqueue(backend, 1)
    assert await take(backend) == [low]


async def test_a_claim_ranks_every_priority_and_takes_the_best_in_order(
    backend: Backend, clock: FakeClock
) -> None:
    """Three priorities at once (the middle one is what a candidate set of only the top
    jobs and the oldest jobs would miss), a batch across them, ranked as the rule says."""
    await ages(backend, AGING)
    low = await enqueue(backend, 0, 3)  # waits 60 s: 0 + 6
    clock.advance(20)
    middle = await enqueue(backend, 5, 3)  # waits 40 s: 5 + 4 = 9
    clock.advance(40)
    high = await enqueue(backend, 8, 3)  # fresh: 8 + 0
    taken = await take(backend, limit=5)
    assert set(taken) == {*middle, *high[:2]}  # 9, 9, 9, 8, 8 (the id breaks the 8s' tie)
    assert set(await take(backend, limit=4)) == {high[2], *low}


async def test_a_flood_of_higher_priorities_cannot_starve_an_aged_job(
    backend: Backend, clock: FakeClock
) -> None:
    """W16 in miniature: each second 10 jobs of priority 1 arrive and a claim takes 10, over a
    standing backlog of 20 (two seconds of work), so priority 1 is always ready. A
    priority-0 job is claimed within 3 x aging_s + one claim interval with aging; without it,
    never (the assertion that fails when aging is taken out)."""
    aging, tick = 2.0, 1.0
    await ages(backend, aging)
    await enqueue(backend, 1, 20)
    (low,) = await enqueue(backend, 0)
    waited = None
    for second in range(1, 60):
        clock.advance(tick)
        await enqueue(backend, 1, 10)
        if low in await take(backend, limit=10):
            waited = second * tick
            break
    assert waited is not None and waited <= 3 * aging + tick, waited


async def test_without_aging_the_same_flood_starves_the_low_job(
    backend: Backend, clock: FakeClock
) -> None:
    await enqueue(backend, 1, 20, queue="plain")
    (low,) = await enqueue(backend, 0, queue="plain")
    for _ in range(60):
        clock.advance(1.0)
        await enqueue(backend, 1, 10, queue="plain")
        jobs = await backend.job_get_available(claim(10, ("plain",)))
        assert low not in [job.id for job in jobs]


async def test_an_aged_claim_leaves_other_queues_and_paused_tasks_alone(
    backend: Backend, clock: FakeClock
) -> None:
    await ages(backend, AGING)
    (other,) = await enqueue(backend, 9, queue="other")
    (aged,) = await enqueue(backend, 0)
    clock.advance(1)
    # the ordinary claim passes an aging queue over (its own claim ranks it)
    assert [j.id for j in await backend.job_get_available(claim(10))] == [other]
    assert await backend.job_ready_exists(None)  # but a burst worker still sees it
    assert await backend.queue_limited() == ["aged"]
    assert await take(backend, 10) == [aged]


async def test_a_reclaimed_job_keeps_its_place(backend: Backend, clock: FakeClock) -> None:
    """Its lease expired (its worker died): it goes back before the jobs enqueued after it,
    of its priority, instead of behind them (pgqueuer#684)."""
    (first,) = await enqueue(backend, 3, queue="default")
    assert [j.id for j in await backend.job_get_available(claim(1))] == [first]
    clock.advance(1)
    later = await enqueue(backend, 3, 3, queue="default")
    clock.advance(120)  # past the lease (60 s + 5 s)
    assert await backend.job_reclaim_expired() == [first]
    record = await backend.job_get(first)
    assert record.priority == 3 and record.state == skiplock.JobState.PENDING
    assert [j.id for j in await backend.job_get_available(claim(2))] == [first, later[0]]


async def test_a_reclaimed_job_keeps_its_age_in_an_aging_queue(
    backend: Backend, clock: FakeClock
) -> None:
    await ages(backend, AGING)
    (low,) = await enqueue(backend, 0)
    assert await take(backend) == [low]
    clock.advance(120)
    assert await backend.job_reclaim_expired() == [low]
    await enqueue(backend, 5)  # fresh: 5 + 0, against 0 + floor(120 / 10) = 12
    assert await take(backend) == [low]


@pytest.mark.parametrize(
    "value", [0, 0.0009, -1.0, 2592000.001, float("inf"), float("nan"), True, "5"]
)
async def test_an_aging_step_out_of_bounds_is_refused_naming_it(
    app: skiplock.App, value: object
) -> None:
    with pytest.raises(skiplock.ConfigurationError, match="aging_s"):
        await app.set_queue_limits("aged", aging_s=value, create=True)  # type: ignore[arg-type]
    assert await app.queues() == []  # nothing written


@pytest.mark.parametrize("value", [0.001, 1, 2592000.0])
async def test_an_aging_step_at_its_bounds_is_stored_and_listed(
    app: skiplock.App, value: float
) -> None:
    await app.set_queue_limits("aged", aging_s=value, create=True)
    (queue,) = await app.queues()
    assert queue.aging_s == value and queue.max_depth is None
    await app.set_queue_limits("aged", aging_s=None)  # None lifts it
    assert (await app.queue_info("aged")).aging_s is None


def test_the_sqlite_aged_claim_searches_the_queue_index(tmp_path: Path) -> None:
    """SQLite's plan: each priority's slice searched on the per-queue pending index, the
    priorities found by min/max searches of it; the only sort is of the candidates."""
    url = f"sqlite:///{tmp_path / 'plan.db'}"
    app = skiplock.App(url)
    asyncio.run(app.migrate())
    asyncio.run(app.close())
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    args = {"now": 1.0, "worker": "w", "token": "t", "default_lease": 1.0, "margin": 1.0}
    args |= {"limit": 10, "q0": "aged", "aging": 10.0, "levels": 16, "lane": "default"}
    plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql.JOB_GET_AVAILABLE_AGED, args)]
    conn.close()
    text = "\n".join(plan)
    assert not any(p.startswith("SCAN skiplock_jobs_live") for p in plan), text
    assert sum("skiplock_jobs_queue_pending_idx" in p for p in plan) >= 5, text
