"""Where a worker's time goes: pyinstrument over W1's bulk enqueue and W2's drain.

    .venv/bin/python -m benchmarks.profile                  # PostgreSQL and SQLite (make profile)
    .venv/bin/python -m benchmarks.profile --backend sqlite --jobs 50000

Each profile runs in this process against a fresh schema (PostgreSQL) or file (SQLite), with
the W2 setting (concurrency 100, claim_batch 100). The text reports go to stdout and to
``benchmarks/results/profile-<workload>-<backend>.txt``, an HTML report beside each. The
profiler costs time itself: read the shares, not the rates (``make bench`` gives those).
benchmarks/HISTORY.md ("Where the time goes") quotes and reads the last run.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import asyncpg
from pyinstrument import Profiler

import skiplock

from .common import DEFAULT_PG_URL

RESULTS = Path(__file__).resolve().parent / "results"
SCHEMA = "skiplock_profile"


async def _noop() -> None:
    pass


async def _app(backend: str, pg_url: str, tmp: Path) -> skiplock.App:
    if backend == "postgres":
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        finally:
            await conn.close()
        app = skiplock.App(f"{pg_url}?schema={SCHEMA}")
    else:
        app = skiplock.App(f"sqlite:///{tmp / 'profile.db'}")
    app.task(name="noop")(_noop)
    await app.migrate()
    return app


async def _analyze(app: skiplock.App, pg_url: str) -> None:
    if app.url.startswith("postgresql"):
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute(f"ANALYZE {SCHEMA}.skiplock_jobs")
        finally:
            await conn.close()


def _save(profiler: Profiler, name: str, summary: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = profiler.output_text(unicode=True, color=False, show_all=False)
    (RESULTS / f"profile-{name}.txt").write_text(f"{summary}\n\n{text}")
    (RESULTS / f"profile-{name}.html").write_text(profiler.output_html())
    print(f"== {name}: {summary}\n{text}")


async def profile(backend: str, jobs: int, pg_url: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        app = await _app(backend, pg_url, Path(tmp))
        task = app.tasks["noop"]
        try:
            profiler = Profiler(interval=0.0005, async_mode="enabled")
            with profiler:
                started = time.perf_counter()
                await app.enqueue_many(task.prepare() for _ in range(jobs))
                took = time.perf_counter() - started
            _save(profiler, f"W1-bulk-{backend}", f"{jobs:,} jobs in {took:.3f} s (profiled)")
            await _analyze(app, pg_url)
            worker = skiplock.Worker(app, concurrency=100, claim_batch=100, poll_interval_s=0.05)
            profiler = Profiler(interval=0.0005, async_mode="enabled")
            with profiler:
                started = time.perf_counter()
                await worker.run(burst=True)
                took = time.perf_counter() - started
            _save(profiler, f"W2-drain-{backend}", f"{jobs:,} jobs in {took:.3f} s (profiled)")
        finally:
            await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("postgres", "sqlite", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    for backend in ("postgres", "sqlite") if args.backend == "both" else (args.backend,):
        asyncio.run(profile(backend, args.jobs, args.pg_url))


if __name__ == "__main__":
    main()
