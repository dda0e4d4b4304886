"""W20, one worker over 1, 2 and 3 PostgreSQL databases (issue 46): the capacity curve.

For each count n, n fresh databases on the bench's PostgreSQL server (``CREATE DATABASE``:
one server, so the machine's cores are shared exactly as they would be by n servers on it),
one App naming them all, N no-op jobs spread evenly over them (written straight into each
database), then ``skiplock worker benchmarks.databases:app --concurrency 20`` exactly as a
user starts it, every other setting at its default: one process serving every database. It
is timed from its start until the last job succeeded (every database polled every 20 ms),
then stopped with SIGTERM. The worker's and the whole server's CPU seconds are read over the
drain, so the CPU a job costs can be read for a bigger machine. The rate is read from the
first job done to the last (the process's start-up left out; the CPU figures include it).

    .venv/bin/python -m benchmarks.databases                 # 1, 2, 3 databases, 3 runs each
    .venv/bin/python -m benchmarks.databases --jobs 60000 --runs 5

The runs are interleaved (each run goes through every count before the next), so load on a
shared machine falls on all of them alike; the table gives each count's median.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import time
import uuid
from pathlib import Path

import asyncpg

from .common import DEFAULT_PG_URL, find_postmaster, pg_cpu_seconds, with_database

ROOT = Path(__file__).resolve().parent.parent
APP = "benchmarks.databases:app"
ENV = "SKIPLOCK_BENCH_DATABASES"
"""The worker's databases: their URLs, comma-separated (the first is the App's own)."""

if os.environ.get(ENV):
    import skiplock

    _urls = os.environ[ENV].split(",")
    app = skiplock.App(
        _urls[0],
        databases={f"d{i}": skiplock.Database(url, number=i) for i, url in enumerate(_urls[1:], 1)},
    )

    @app.task(name="noop")
    async def noop(n: int) -> None:
        """A no-op job."""


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (and its reaped children) so far."""
    import psutil

    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system + t.children_user + t.children_system)


async def drain(base: str, count: int, jobs: int) -> dict[str, float]:
    """``count`` fresh databases, ``jobs`` jobs over them, the CLI worker until all ran."""
    names = [f"bench_dbs_{uuid.uuid4().hex[:8]}" for _ in range(count)]
    admin = await asyncpg.connect(base)
    for name in names:
        await admin.execute(f'CREATE DATABASE "{name}"')
    urls = [with_database(base, name) for name in names]
    os.environ[ENV] = ",".join(urls)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    conns: list[asyncpg.Connection] = []
    try:
        migrate = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "skiplock", "migrate", APP, env=env, cwd=ROOT
        )
        assert await migrate.wait() == 0
        share = [jobs // count + (1 if i < jobs % count else 0) for i in range(count)]
        conns = [await asyncpg.connect(url) for url in urls]
        for conn, n in zip(conns, share, strict=True):
            await conn.execute(
                """INSERT INTO skiplock_jobs (task, queue, args, kwargs, max_attempts)
                   SELECT 'noop', 'default', jsonb_build_array(g), '{}', 5
                   FROM generate_series(1, $1) g""",
                n,
            )
            await conn.execute("ANALYZE skiplock_jobs")
        postmaster = await find_postmaster(base)
        server_before = pg_cpu_seconds(postmaster) or 0.0
        started = time.perf_counter()
        worker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "skiplock", "worker", APP, "--concurrency", "20",
            "--log-level", "error", env=env, cwd=ROOT,
        )  # fmt: skip
        count_sql = "SELECT count(*) FROM skiplock_jobs WHERE state = 'succeeded'"
        try:
            first: tuple[float, int] | None = None
            while (done := sum([await c.fetchval(count_sql) for c in conns])) < jobs:
                if first is None and done:
                    first = (time.perf_counter(), done)
                await asyncio.sleep(0.02)
            seconds = time.perf_counter() - started
            begun, already = first or (started, 0)
            rate = (jobs - already) / (time.perf_counter() - begun)
            worker_cpu = process_cpu(worker.pid)
            server_cpu = (pg_cpu_seconds(postmaster) or 0.0) - server_before
        finally:
            worker.send_signal(signal.SIGTERM)
            await asyncio.wait_for(worker.wait(), 60)
    finally:
        for conn in conns:
            await conn.close()
        for name in names:
            await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()
    return {
        "seconds": seconds,
        "per_s": rate,
        "worker_us": 1e6 * worker_cpu / jobs,
        "server_us": 1e6 * server_cpu / jobs,
    }


async def main(args: argparse.Namespace) -> None:
    counts = [int(c) for c in args.counts.split(",")]
    results: dict[int, list[dict[str, float]]] = {c: [] for c in counts}
    for run in range(args.runs):
        for count in counts:
            got = await drain(args.url, count, args.jobs)
            results[count].append(got)
            print(
                f"run {run + 1}: {count} database(s): {got['seconds']:.2f} s, "
                f"{got['per_s']:,.0f} jobs/s",
                flush=True,
            )
    print(f"\nW20: {args.jobs:,} no-op jobs, one CLI worker at its defaults (--concurrency 20)")
    print("| databases | jobs/s (median) | every run | worker CPU µs/job | server CPU µs/job |")
    print("|---|---|---|---|---|")
    for count, runs in results.items():
        rates = [r["per_s"] for r in runs]
        print(
            f"| {count} | {statistics.median(rates):,.0f} | "
            + ", ".join(f"{r:,.0f}" for r in rates)
            + f" | {statistics.median(r['worker_us'] for r in runs):.0f}"
            + f" | {statistics.median(r['server_us'] for r in runs):.0f} |"
        )
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.databases")
    p.add_argument("--url", default=os.environ.get("SKIPLOCK_BENCH_PG", DEFAULT_PG_URL))
    p.add_argument("--jobs", type=int, default=30_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--counts", default="1,2,3", help="how many databases, comma-separated")
    return p.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
