"""W20, one worker over 1, 2 and 3 PostgreSQL databases (issue 46): W2 and W4 at each count.

For each count n, n fresh databases on the bench's PostgreSQL server (``CREATE DATABASE``:
one server, so the machine's cores are shared exactly as they would be by n servers on it),
one App naming them all, and ``skiplock worker benchmarks.databases:app --concurrency 20``
exactly as a user starts it, every other setting at its default: one process serving every
database. Two workloads, named after the main suite's (benchmarks/run.py) so the docs can
cite them:

- **W2 over databases**, the capacity curve: N no-op jobs spread evenly over the databases
  (written straight into each, lane ``default``), then the worker is started. It is timed
  from its start until the last job succeeded (every database polled every 20 ms), then
  stopped with SIGTERM. The worker's and the whole server's CPU seconds are read over the
  drain, so the CPU a job costs can be read for a bigger machine. The rate is read from the
  first job done to the last (the process's start-up left out; the CPU figures include it).
- **W4 over databases**, latency: the worker idle and warmed up (it has run one job in every
  database), then this process, through an App with the same databases, enqueues 200 jobs
  one every 20 ms, round-robin over the databases, each routed to its database by its lane
  (``default`` in the App's own database, ``l1`` living in ``d1``...). Latency is read back from
  the tables afterwards: ``attempted_at - created_at``, the claim's transaction time minus
  the enqueue's, both by the database's clock (one server: one clock).

    .venv/bin/python -m benchmarks.databases                 # 1, 2, 3 databases, 3 runs each
    .venv/bin/python -m benchmarks.databases --quick         # a smoke test: small, 1 run
    .venv/bin/python -m benchmarks.databases --only W4 --runs 5

The runs are interleaved (each run goes through every count before the next), so load on a
shared machine falls on all of them alike; the tables give each count's median. W8 over
databases (a held horizon in one database, the others' rates recorded) is
benchmarks/databases_held.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from .common import DEFAULT_PG_URL, find_postmaster, percentile, pg_cpu_seconds, with_database

ROOT = Path(__file__).resolve().parent.parent
APP = "benchmarks.databases:app"
ENV = "SKIPLOCK_BENCH_DATABASES"
"""The worker's databases: their URLs, comma-separated (the first is the App's own)."""
LANES_ENV = "SKIPLOCK_BENCH_LANES"
"""Set to 1: the App gets a lane in each database past its own (``l1`` in ``d1``...), for W4
and W8, whose jobs are routed there (the App's own database's are in ``default``). W2 runs
without (its jobs are written in lane ``default`` of each database), as its published figures
were measured: each lane is one more claim statement a round in its database."""
SETTLE_S = 0.5
"""How long the warmed-up worker idles (listening, polling) before W4's first job, as in the
main suite's W4 (benchmarks/child.py)."""


def make_app(urls: list[str], lanes: bool) -> tuple[Any, Any, Any]:
    """The App over ``urls`` (the first its own database, then ``d1``, ``d2``...), its no-op
    task ``noop`` and the warm-up task ``warm`` (a no-op the readings leave out)."""
    import skiplock

    app = skiplock.App(
        urls[0],
        databases={f"d{i}": skiplock.Database(url, number=i) for i, url in enumerate(urls[1:], 1)},
        lanes={lane_of(i): f"d{i}" for i in range(1, len(urls))} if lanes else None,
    )

    async def noop(n: int) -> None:
        """A no-op job."""

    async def warm(n: int) -> None:
        """A no-op job that tells the worker is up in its database."""

    return app, app.task(name="noop")(noop), app.task(name="warm")(warm)


def lane_of(i: int) -> str:
    """The lane living in database ``i``: ``default`` in the App's own (0), else ``l1``,
    ``l2``... (an App of one database with ``lanes=`` would write its jobs in a lane its
    worker does not claim: a worker of one database claims ``default`` alone)."""
    return f"l{i}" if i else "default"


if os.environ.get(ENV):
    app, noop, warm = make_app(os.environ[ENV].split(","), os.environ.get(LANES_ENV) == "1")


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (and its reaped children) so far."""
    import psutil

    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system + t.children_user + t.children_system)


# -- fresh databases and the worker ---------------------------------------------------------------


@dataclass
class Fresh:
    """``count`` fresh, migrated databases: their URLs, the environment that names them to a
    child process (the worker, a producer), and one connection to each for the readings."""

    urls: list[str]
    env: dict[str, str]
    conns: list[asyncpg.Connection] = field(default_factory=list)


@contextlib.asynccontextmanager
async def fresh_databases(base: str | list[str], count: int, lanes: bool) -> AsyncIterator[Fresh]:
    """Create ``count`` databases on ``base``'s server (or database ``i`` on ``base[i]``'s,
    one server per database: benchmarks/databases_held.py's ``--servers``), migrate them
    (``skiplock migrate``, as a user would), and drop them ``WITH (FORCE)`` on the way out,
    even after a failure."""
    bases = base if isinstance(base, list) else [base] * count
    names = [f"bench_dbs_{uuid.uuid4().hex[:8]}" for _ in range(count)]
    admins = {url: await asyncpg.connect(url) for url in dict.fromkeys(bases)}
    fresh = Fresh([with_database(bases[i], name) for i, name in enumerate(names)], {})
    made: list[int] = []
    try:
        for i, name in enumerate(names):
            await admins[bases[i]].execute(f'CREATE DATABASE "{name}"')
            made.append(i)
        path = os.pathsep.join([str(ROOT), str(ROOT / "src")])
        fresh.env = {**os.environ, ENV: ",".join(fresh.urls), "PYTHONPATH": path}
        fresh.env.pop(LANES_ENV, None)
        if lanes:
            fresh.env[LANES_ENV] = "1"
        fresh.env.pop("SKIPLOCK_DATABASE_URL", None)
        migrate = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "skiplock", "migrate", APP, env=fresh.env, cwd=ROOT,
            stdout=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        if await migrate.wait() != 0:
            raise RuntimeError("skiplock migrate failed")
        fresh.conns = [await asyncpg.connect(url) for url in fresh.urls]
        yield fresh
    finally:
        for conn in fresh.conns:
            await conn.close()
        for i in made:
            await admins[bases[i]].execute(f'DROP DATABASE IF EXISTS "{names[i]}" WITH (FORCE)')
        for admin in admins.values():
            await admin.close()


async def start_worker(env: dict[str, str]) -> asyncio.subprocess.Process:
    """``skiplock worker benchmarks.databases:app --concurrency 20``: the CLI at its defaults
    (errors only in the log, so its output costs nothing), serving every database."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skiplock", "worker", APP, "--concurrency", "20",
        "--log-level", "error", env=env, cwd=ROOT,
    )  # fmt: skip


async def stop_worker(worker: asyncio.subprocess.Process) -> None:
    """SIGTERM, as a deployment stops it; its exit code must be 0 (a clean shutdown)."""
    if worker.returncode is None:
        worker.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(worker.wait(), 60)
    if code != 0:
        raise RuntimeError(f"the worker exited {code} after SIGTERM")


async def wait_succeeded(
    conns: list[asyncpg.Connection], task: str, expected: int, timeout: float
) -> None:
    """Poll every database (20 ms apart) until ``expected`` jobs of ``task`` succeeded in all
    of them together; a RuntimeError after ``timeout`` seconds, saying how many did."""
    sql = "SELECT count(*) FROM skiplock_jobs WHERE task = $1 AND state = 'succeeded'"
    deadline = time.monotonic() + timeout
    while (done := sum([await c.fetchval(sql, task) for c in conns])) < expected:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{done} of {expected} {task} jobs succeeded in {timeout:.0f} s")
        await asyncio.sleep(0.02)


async def warm_up(fresh: Fresh, warm_task: Any) -> None:
    """One ``warm`` job in every database's lane (``warm_task``: the task of an App with
    lanes, in a process other than the worker), and wait until each has run: the worker is
    then up and claiming in every database."""
    for i in range(len(fresh.urls)):
        await warm_task.using(lane=lane_of(i)).aenqueue(-1)
    await wait_succeeded(fresh.conns, "warm", len(fresh.urls), 120)


# -- W2 over databases: the drain -----------------------------------------------------------------


async def drain(base: str, count: int, jobs: int) -> dict[str, float]:
    """``count`` fresh databases, ``jobs`` jobs over them, the CLI worker until all ran."""
    async with fresh_databases(base, count, lanes=False) as fresh:
        share = [jobs // count + (1 if i < jobs % count else 0) for i in range(count)]
        for conn, n in zip(fresh.conns, share, strict=True):
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
        worker = await start_worker(fresh.env)
        count_sql = "SELECT count(*) FROM skiplock_jobs WHERE state = 'succeeded'"
        try:
            first: tuple[float, int] | None = None
            while (done := sum([await c.fetchval(count_sql) for c in fresh.conns])) < jobs:
                if first is None and done:
                    first = (time.perf_counter(), done)
                await asyncio.sleep(0.02)
            seconds = time.perf_counter() - started
            begun, already = first or (started, 0)
            rate = (jobs - already) / (time.perf_counter() - begun)
            worker_cpu = process_cpu(worker.pid)
            server_cpu = (pg_cpu_seconds(postmaster) or 0.0) - server_before
        finally:
            await stop_worker(worker)
    return {
        "seconds": seconds,
        "per_s": rate,
        "worker_us": 1e6 * worker_cpu / jobs,
        "server_us": 1e6 * server_cpu / jobs,
    }


# -- W4 over databases: latency -------------------------------------------------------------------

LATENCY_SQL = """
SELECT extract(epoch FROM attempted_at - created_at)::float8 AS s, attempt
FROM skiplock_jobs WHERE task = 'noop' AND state = 'succeeded'
"""


async def latency(base: str, count: int, jobs: int, interval: float) -> dict[str, float]:
    """``count`` fresh databases, the CLI worker idle over them, then ``jobs`` jobs enqueued
    ``interval`` s apart, round-robin over the databases; enqueue → claim read from the
    tables (ms). Every job must have run once, in the database its lane lives in."""
    async with fresh_databases(base, count, lanes=True) as fresh:
        worker = await start_worker(fresh.env)
        try:
            bench_app, noop_task, warm_task = make_app(fresh.urls, lanes=True)
            routed = [noop_task.using(lane=lane_of(i)) for i in range(count)]
            try:
                await warm_up(fresh, warm_task)  # the App's pools are open, too
                await asyncio.sleep(SETTLE_S)  # idle: listening, its poll timer running
                start = time.monotonic()
                for k in range(jobs):
                    # on a fixed schedule: a slow enqueue does not push the next ones back
                    await asyncio.sleep(max(0.0, start + k * interval - time.monotonic()))
                    await routed[k % count].aenqueue(k)
            finally:
                await bench_app.close()
            await wait_succeeded(fresh.conns, "noop", jobs, 60)
        finally:
            await stop_worker(worker)
        per_db = [await conn.fetch(LATENCY_SQL) for conn in fresh.conns]
    for i, rows in enumerate(per_db):
        want = jobs // count + (1 if i < jobs % count else 0)
        if len(rows) != want or any(r["attempt"] != 1 for r in rows):
            raise RuntimeError(f"database {i}: {len(rows)} jobs ran (expected {want}, once each)")
    ms = [1000 * r["s"] for rows in per_db for r in rows]
    return {
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms),
        # the slowest database's p99: a database the worker serves late would show here
        "worst_db_p99_ms": max(percentile([1000 * r["s"] for r in rows], 99) for rows in per_db),
    }


# -- the report -----------------------------------------------------------------------------------


def w2_table(jobs: int, results: dict[int, list[dict[str, float]]]) -> None:
    print(f"\nW2 over databases: drain {jobs:,} no-op jobs, one CLI worker at its defaults")
    print("| workload | databases | jobs/s (median) | every run | worker CPU µs/job |"
          " server CPU µs/job |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for count, runs in results.items():
        rates = [r["per_s"] for r in runs]
        print(
            f"| W2 | {count} | {statistics.median(rates):,.0f} | "
            + ", ".join(f"{r:,.0f}" for r in rates)
            + f" | {statistics.median(r['worker_us'] for r in runs):.0f}"
            + f" | {statistics.median(r['server_us'] for r in runs):.0f} |"
        )


def w4_table(jobs: int, interval: float, results: dict[int, list[dict[str, float]]]) -> None:
    print(
        f"\nW4 over databases: an idle CLI worker at its defaults, {jobs} jobs enqueued "
        f"{interval * 1000:.0f} ms apart round-robin over the databases; enqueue → claim, "
        "database clock (ms)"
    )
    print("| workload | databases | p50 (median) | p99 (median) | p99 every run | max |"
          " slowest database's p99 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for count, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        every = ", ".join(f"{r['p99_ms']:.2f}" for r in runs)
        print(
            f"| W4 | {count} | {med['p50_ms']:.2f} | {med['p99_ms']:.2f} | {every} | "
            f"{med['max_ms']:.2f} | {med['worst_db_p99_ms']:.2f} |"
        )


async def main(args: argparse.Namespace) -> None:
    counts = [int(c) for c in args.counts.split(",")]
    only = args.only.split(",")
    drains: dict[int, list[dict[str, float]]] = {c: [] for c in counts}
    latencies: dict[int, list[dict[str, float]]] = {c: [] for c in counts}
    for run in range(args.runs):
        for count in counts:
            if "W2" in only:
                got = await drain(args.url, count, args.jobs)
                drains[count].append(got)
                print(
                    f"run {run + 1}: W2, {count} database(s): {got['seconds']:.2f} s, "
                    f"{got['per_s']:,.0f} jobs/s",
                    flush=True,
                )
            if "W4" in only:
                lat = await latency(args.url, count, args.latency_jobs, args.interval)
                latencies[count].append(lat)
                print(
                    f"run {run + 1}: W4, {count} database(s): p50 {lat['p50_ms']:.2f} ms, "
                    f"p99 {lat['p99_ms']:.2f} ms",
                    flush=True,
                )
    print("\nW20: one `skiplock worker benchmarks.databases:app --concurrency 20` over 1-3 "
          f"databases of one server, {args.runs} interleaved run(s)")  # fmt: skip
    if "W2" in only:
        w2_table(args.jobs, drains)
    if "W4" in only:
        w4_table(args.latency_jobs, args.interval, latencies)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.databases")
    p.add_argument("--url", default=os.environ.get("SKIPLOCK_BENCH_PG", DEFAULT_PG_URL))
    p.add_argument("--jobs", type=int, help="W2's jobs (default 30,000; --quick 5,000)")
    p.add_argument("--latency-jobs", type=int, help="W4's jobs (default 200; --quick 50)")
    p.add_argument("--interval", type=float, default=0.02, help="W4: seconds between enqueues")
    p.add_argument("--runs", type=int, help="interleaved runs (default 3; --quick 1)")
    p.add_argument("--counts", default="1,2,3", help="how many databases, comma-separated")
    p.add_argument("--only", default="W2,W4", help="workloads, comma-separated")
    p.add_argument("--quick", action="store_true", help="a smoke test: small sizes, one run")
    args = p.parse_args(argv)
    args.jobs = args.jobs or (5_000 if args.quick else 30_000)
    args.latency_jobs = args.latency_jobs or (50 if args.quick else 200)
    args.runs = args.runs or (1 if args.quick else 3)
    return args


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
