"""The claim's plan: on the pending-only index, in its order, whatever the table holds."""

from __future__ import annotations

import asyncpg

import skiplock
from skiplock._backends.base import ClaimParams

from ..conftest import PG_URL


async def test_claim_uses_the_pending_index_with_a_million_finished_rows(pg_url: str) -> None:
    app = skiplock.App(pg_url)
    await app.migrate()
    schema = pg_url.rsplit("schema=", 1)[1]
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(
            f"""INSERT INTO "{schema}".skiplock_jobs
                    (queue, task, state, max_attempts, attempt, finished_at)
                SELECT 'default', 'old', 'succeeded', 3, 1, now()
                FROM generate_series(1, 1000000)"""
        )
        await conn.execute(
            f"""INSERT INTO "{schema}".skiplock_jobs (queue, task, max_attempts)
                SELECT 'default', 'new', 3 FROM generate_series(1, 100)"""
        )
        await conn.execute(f'ANALYZE "{schema}".skiplock_jobs')
        backend = await app.backend()
        claim = backend._sql["JOB_GET_AVAILABLE"]  # type: ignore[attr-defined]
        # EXPLAIN without ANALYZE plans the claim without running it.
        args = (None, 10, "w", "t", 60.0, 5.0, None, False)
        plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + claim, *args))
    finally:
        await conn.close()
        await app.close()
    assert "skiplock_jobs_pending_idx" in plan, plan
    assert "Seq Scan on skiplock_jobs" not in plan, plan  # the tiny settings tables may


async def test_all_queues_claim_keeps_the_index_order_when_statistics_lag_a_flood(
    pg_url: str,
) -> None:
    """Statistics taken while the table was empty; then a flood. The claim must not sort it.

    Planned on an ordinary session from such statistics, the claim reads every pending row
    and sorts them (43 ms a claim at 100,000 pending, measured). The all-queues claim runs on
    sessions that price sorting out, so it walks the pending index in order and stops at its
    LIMIT whatever the statistics say.
    """
    app = skiplock.App(pg_url)
    await app.migrate()
    schema = pg_url.rsplit("schema=", 1)[1]
    conn = await asyncpg.connect(PG_URL)
    backend = await app.backend()
    try:
        await conn.execute(f'ANALYZE "{schema}".skiplock_jobs')  # empty
        await conn.execute(
            f"""INSERT INTO "{schema}".skiplock_jobs (queue, task, max_attempts)
                SELECT 'default', 'flood', 3 FROM generate_series(1, 5000)"""
        )
        claim = backend._sql["JOB_GET_AVAILABLE"]  # type: ignore[attr-defined]
        args = (None, 100, "w", "t", 60.0, 5.0, None, False)
        ordinary = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + claim, *args))
        async with backend._claim_pool.acquire() as claimer:  # type: ignore[attr-defined]
            plan = "\n".join(r[0] for r in await claimer.fetch("EXPLAIN " + claim, *args))
        jobs = await backend.job_get_available(
            ClaimParams(None, 100, "w", "t", default_lease=60.0, lease_margin=5.0)
        )
    finally:
        await conn.close()
        await app.close()
    assert "Sort" in ordinary, f"the stale-statistics plan this test guards against:\n{ordinary}"
    assert "Index Scan using skiplock_jobs_pending_idx" in plan, plan
    assert "Sort" not in plan, plan
    assert len(jobs) == 100 and all(j.task == "flood" for j in jobs)
