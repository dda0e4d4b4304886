"""Large batches take a faster path (PostgreSQL: COPY; SQLite: many rows a statement).

Everything a one-row insert promises must hold for them too: ids in input order, every
field, schedules, bounded queues all or nothing, the caller's transaction, wake-ups.
"""

from __future__ import annotations

import json
from datetime import timedelta

import asyncpg
import pytest

import skiplock
from skiplock._backends import Backend
from skiplock._backends.params import JobInsertManyParams
from skiplock._backends.postgres.rows import COPY_MIN_ROWS
from skiplock._job import NewJob

from ..helpers import FakeClock, await_until, server_url
from .helpers import claim

N = max(500, COPY_MIN_ROWS)


def varied_job(i: int, clock: FakeClock) -> NewJob:
    return NewJob(
        task=f"t{i % 4}",
        queue="a" if i % 3 == 0 else "b",
        args_json=f"[{i}]",
        kwargs_json=json.dumps({"i": i}),
        priority=i % 5,
        max_attempts=1 + i % 4,
        run_after_s=60.0 if i % 7 == 0 else None,
        run_at=clock() + timedelta(hours=1) if i % 11 == 0 and i % 7 else None,
        timeout=2.5 if i % 2 == 0 else None,
        correlation_id=f"c{i}",
        lease_s=30.0 if i % 13 == 0 else None,
    )


def delay_of(i: int) -> timedelta:
    if i % 7 == 0:
        return timedelta(seconds=60)
    return timedelta(hours=1) if i % 11 == 0 else timedelta(0)


async def test_large_batch_keeps_order_fields_and_schedules(
    backend: Backend, clock: FakeClock
) -> None:
    ids = await backend.job_insert_many(
        JobInsertManyParams([varied_job(i, clock) for i in range(N)])
    )
    assert len(ids) == N and ids == sorted(set(ids))
    for i in (0, 1, 7, 11, 13, 77, N - 1):
        record = await backend.job_get(ids[i])
        assert (record.task, record.queue, record.priority) == (
            f"t{i % 4}",
            "a" if i % 3 == 0 else "b",
            i % 5,
        )
        assert (record.args, record.kwargs, record.max_attempts) == ([i], {"i": i}, 1 + i % 4)
        assert record.correlation_id == f"c{i}"
        assert record.run_at == clock() + delay_of(i)
    claimed = await backend.job_get_available(claim(limit=N))
    ready = [i for i in range(N) if not delay_of(i)]
    assert sorted(j.id for j in claimed) == [ids[i] for i in ready]
    index = {job_id: i for i, job_id in enumerate(ids)}
    for job in claimed:
        i = index[job.id]
        assert job.timeout == (2.5 if i % 2 == 0 else None)
        expected_lease = 30.0 if i % 13 == 0 else (2.5 if i % 2 == 0 else 60.0) + 5.0
        assert job.lease_s == pytest.approx(expected_lease)
    clock.advance(61)
    later = await backend.job_get_available(claim(limit=N))
    assert sorted(j.id for j in later) == [ids[i] for i in range(N) if i % 7 == 0]


async def test_large_batch_into_a_full_queue_inserts_nothing(
    clocked_app: skiplock.App, backend: Backend
) -> None:
    await backend.job_insert_many(JobInsertManyParams([NewJob("t", "bounded", "[]", "{}", 0, 1)]))
    await clocked_app.set_queue_limits("bounded", max_depth=N)
    with pytest.raises(skiplock.QueueFull, match="'bounded' is at its max_depth"):
        await backend.job_insert_many(
            JobInsertManyParams(
                [NewJob("t", "other", "[]", "{}", 0, 1)]
                + [NewJob("t", "bounded", "[]", "{}", 0, 1) for _ in range(N)]
            )
        )
    counts = await backend.job_count_by_state(None)
    assert sum(counts.values()) == 1
    ids = await backend.job_insert_many(
        JobInsertManyParams([NewJob("t", "bounded", "[]", "{}", 0, 1)] * (N - 1))
    )
    assert len(ids) == N - 1


@pytest.mark.parametrize("unique", [False, True], ids=["plain", "unique-keys"])
async def test_enqueue_many_is_one_transaction_however_large(
    clocked_app: skiplock.App, unique: bool
) -> None:
    """12,000 jobs (enqueue_many once sent 5,000 a transaction) into a queue bounded at 10,000:
    nothing is enqueued, so the caller can simply try again. Without a connection, in one
    transaction; with an autocommit asyncpg connection, in one too."""

    @clocked_app.task(name="big", queue="bounded")
    def big(n: int) -> None:
        pass

    await clocked_app.set_queue_limits("bounded", max_depth=10_000)
    key = "k{}" if unique else None
    jobs = [big.prepare(n) for n in range(12_000)]
    if key:
        jobs = [big.using(unique_key=key.format(n)).prepare(n) for n in range(12_000)]
    with pytest.raises(skiplock.QueueFull):
        await clocked_app.enqueue_many(jobs)
    assert sum((await clocked_app.counts()).values()) == 0
    if clocked_app.url.startswith("postgresql"):
        conn = await asyncpg.connect(server_url(clocked_app.url))
        try:
            with pytest.raises(skiplock.QueueFull):
                await clocked_app.enqueue_many(jobs, connection=conn)
        finally:
            await conn.close()
        assert sum((await clocked_app.counts()).values()) == 0
    handles = await clocked_app.enqueue_many(jobs[:10_000])
    assert len({h.id for h in handles}) == 10_000


async def test_large_batch_wakes_a_listener(pg_url: str) -> None:
    app = skiplock.App(pg_url)
    await app.migrate()
    backend = await app.backend()
    woken: list[str] = []
    try:
        async with backend.listen(woken.append):
            await backend.job_insert_many(
                JobInsertManyParams([NewJob("t", q, "[]", "{}", 0, 1) for q in "xy" * N])
            )
            await await_until(lambda: len(woken) >= 2, "both queues' notifications")
    finally:
        await app.close()
    assert sorted(set(woken)) == ["x", "y"]


async def test_large_batch_joins_the_callers_asyncpg_transaction(pg_url: str) -> None:
    app = skiplock.App(pg_url)
    await app.migrate()

    @app.task(name="bulk")
    async def bulk(n: int) -> None:
        pass

    conn = await asyncpg.connect(server_url(pg_url))
    try:
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await app.enqueue_many([bulk.prepare(i) for i in range(N)], connection=conn)
                raise RuntimeError("business failure")
        backend = await app.backend()
        assert sum((await backend.job_count_by_state(None)).values()) == 0
        async with conn.transaction():
            handles = await app.enqueue_many([bulk.prepare(i) for i in range(N)], connection=conn)
        assert [(await h.fetch()).args for h in handles[:3]] == [[0], [1], [2]]
    finally:
        await conn.close()
        await app.close()
