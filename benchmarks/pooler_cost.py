"""What ``?pooler=transaction`` costs: a W2-style drain with prepared statements on and off.

Run: .venv/bin/python -m benchmarks.pooler_cost [POSTGRES_URL] [PGBOUNCER_URL]. Drains N queued
no-op jobs in process (one burst worker, concurrency 100, claim_batch 100), ROUNDS times per
mode, the modes alternating so a drifting machine drifts for all alike:

- direct: the ordinary URL (statements prepared by name and cached; the claim on sessions
  with ``enable_sort=off``);
- pooler=transaction: the same server directly, in pooled mode (no statement cache: each
  statement parsed and planned again; the claim in a transaction with ``SET LOCAL``);
- through PgBouncer (if a second URL is given): pooled mode through a real pooler.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

import asyncpg

import skiplock
from skiplock import Worker

URL = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/test"
BOUNCER = sys.argv[2] if len(sys.argv) > 2 else None
N, ROUNDS, SCHEMA = 20_000, 5, "skiplock_pooler_bench"


async def drain(url: str) -> float:
    app = skiplock.App(url)
    noop = app.task(name="noop")(lambda: None)
    await app.migrate()
    await app.enqueue_many(noop.prepare() for _ in range(N))
    worker = Worker(app, concurrency=100, claim_batch=100, poll_interval_s=0.05)
    start = time.perf_counter()
    await worker.run(burst=True)
    took = time.perf_counter() - start
    await app.close()
    return N / took


async def reset() -> None:
    conn = await asyncpg.connect(URL)
    await conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
    await conn.close()


async def main() -> None:
    modes = {
        "direct": f"{URL}?schema={SCHEMA}",
        "pooler=transaction, direct to the server": f"{URL}?schema={SCHEMA}&pooler=transaction",
    }
    if BOUNCER:
        modes["pooler=transaction, through PgBouncer"] = (
            f"{BOUNCER}?schema={SCHEMA}&pooler=transaction"
        )
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(ROUNDS):
        for mode, url in modes.items():
            await reset()
            rates[mode].append(await drain(url))
    await reset()
    base = statistics.median(rates["direct"])
    print(f"| mode | jobs/s (median of {ROUNDS}) | runs | vs direct |")
    print("|---|---|---|---|")
    for mode, runs in rates.items():
        median = statistics.median(runs)
        shown = ", ".join(f"{r:,.0f}" for r in runs)
        print(f"| {mode} | {median:,.0f} | {shown} | {median / base - 1:+.0%} |")


if __name__ == "__main__":
    asyncio.run(main())
