"""With a million finished rows kept, the claim still reads only the pending-only index."""

from __future__ import annotations

import asyncpg

import skiplock

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
