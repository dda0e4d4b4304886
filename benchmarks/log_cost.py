"""What logging costs a busy worker: a W2-style drain at ``warning``, ``info`` and ``debug``.

Run: .venv/bin/python -m benchmarks.log_cost [POSTGRES_URL]. Drains N queued no-op jobs in
process (one burst worker at the defaults but ``concurrency=100``), its log going through
``skiplock.configure_logging`` in the plain format to a real file, ROUNDS times per level,
the levels alternating (each first as often as last, so a drifting machine drifts for all
alike), on PostgreSQL and on a SQLite file:

- warning: only failures and outages (none here);
- info, the default: a summary line an interval (``log_summary_interval_s``), none per job;
- debug: a line when each job starts and one when it ends (what ``info`` logged before
  issue 24).

Issue 24's bar: the rate at ``info`` at least 95 % of the rate at ``warning``.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import asyncpg

import skiplock
from skiplock import Worker

URL = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/test"
N, ROUNDS, SCHEMA = 20_000, 6, "skiplock_log_bench"
LEVELS = ("warning", "info", "debug")


async def drain(url: str, level: str, log_file: Path) -> tuple[float, int]:
    """Jobs a second of one drain at ``level``, and the lines it logged."""
    app = skiplock.App(url)
    noop = app.task(name="noop")(lambda: None)
    await app.migrate()
    await app.enqueue_many(noop.prepare() for _ in range(N))
    with log_file.open("w") as stream:
        skiplock.configure_logging(level=level, stream=stream)
        worker = Worker(app, concurrency=100)
        start = time.perf_counter()
        await worker.run(burst=True)
        took = time.perf_counter() - start
        logging.getLogger().handlers[0].flush()
    logging.getLogger().setLevel(logging.WARNING)
    await app.close()
    return N / took, sum(1 for _ in log_file.open())


async def reset_pg() -> None:
    conn = await asyncpg.connect(URL)
    await conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
    await conn.close()


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for backend in ("postgres", "sqlite"):
            rates: dict[str, list[float]] = {level: [] for level in LEVELS}
            lines: dict[str, int] = {}
            for round_ in range(ROUNDS):
                shift = round_ % len(LEVELS)  # each level first, second and last alike
                for level in LEVELS[shift:] + LEVELS[:shift]:
                    if backend == "postgres":
                        await reset_pg()
                        url = f"{URL}?schema={SCHEMA}"
                    else:
                        url = f"sqlite:///{folder}/log-{round_}-{level}.db"
                    rate, lines[level] = await drain(url, level, folder / "worker.log")
                    rates[level].append(rate)
            if backend == "postgres":
                await reset_pg()
            base = statistics.median(rates["warning"])
            print(f"\n{backend}: {N:,} no-op jobs, concurrency 100, medians of {ROUNDS}")
            print("| level | jobs/s | runs | lines logged | vs warning |")
            print("|---|---|---|---|---|")
            for level, runs in rates.items():
                median = statistics.median(runs)
                shown = ", ".join(f"{r:,.0f}" for r in runs)
                print(
                    f"| {level} | {median:,.0f} | {shown} | {lines[level]:,} "
                    f"| {median / base:.0%} |"
                )


if __name__ == "__main__":
    asyncio.run(main())
