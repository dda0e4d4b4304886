"""W18, process tasks (issue 47): what running a sync job in a child process costs.

Every row is a backlog drained by a worker started as a user starts it, every setting at its
default but what the row names (and a quiet log), stopped with SIGTERM (it must exit 0):

- ``skiplock worker benchmarks.processes_app:app`` on a fresh PostgreSQL database of the bench's
  server (``CREATE DATABASE``, dropped ``WITH (FORCE)`` afterwards), the jobs written straight
  into its table before the worker starts;
- ``celery -A benchmarks.celery_app worker`` on its prefork pool, the broker the machine's
  Redis (``--broker``, one queue of the run's own, no result backend), the jobs sent before
  the worker starts.

The rows:

1. **no-op jobs** (500; ``--quick`` 100): a thread task at ``--concurrency 2``, a process task
   at ``--concurrency 2`` (two children), Celery prefork ``-c 2``;
2. **50 ms of CPU** (100; ``--quick`` 20): each job spins in pure Python until its thread has
   used 50 ms of CPU (``time.thread_time``); the same three workers;
3. **CPU-bound throughput**, the same 50 ms jobs: ``--processes 2`` with thread tasks (two
   worker processes, a GIL each, at the default concurrency), the same with ``--prefetch 0``
   (each process claims for its free slots only: at the defaults one process may claim most
   of the backlog ahead), against one worker with process tasks and ``--child-processes 2``.

Ahead of the measured jobs each backlog holds one warm-up job per slot (a thread, a child, a
pool process; written at a higher priority, or sent first), which waits until every slot has
one: the measured jobs start with every thread or child up, and the worker's start-up is read
apart ("ready": launched to the first measured job's start). Each measured job records when it
started and ended on ``CLOCK_MONOTONIC`` (one clock for every process of the machine): skiplock's
as the job's result, Celery's in a Redis list. The drain runs from the first measured start to
the last measured end; per job: the drain over the jobs (wall), and the drain times the 2 slots
over the jobs (the time a job holds a slot, start to the next job's start), less the work's 50
ms ("above the work"). skiplock's rows also give the drain on the database clock (the first
claim's ``attempted_at`` to the last ``finished_at``: the outcome's write included). Every job
must have run exactly once (skiplock: succeeded on attempt 1, counted in the table; Celery: one
record each in Redis, the queue empty), and the output says so.

    .venv/bin/python -m benchmarks.processes                  # 3 interleaved runs
    .venv/bin/python -m benchmarks.processes --quick          # a smoke test: small, 1 run
    .venv/bin/python -m benchmarks.processes --only noop,cpu --runs 5 --noop-jobs 2000

The runs are interleaved (each run goes through every row before the next), so load on a
shared machine falls on all of them alike; the tables give medians and every run's jobs/s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from .common import DEFAULT_PG_URL, now, with_database

ROOT = Path(__file__).resolve().parent.parent
SKIPLOCK_APP = "benchmarks.processes_app:app"
CELERY_APP = "benchmarks.celery_app"
DIR_ENV = "SKIPLOCK_BENCH_W18_DIR"
DEFAULT_BROKER = "redis://127.0.0.1:6379/9"
DEFAULT_CONCURRENCY = 10
"""The CLI worker's default ``--concurrency``: the slots of each ``--processes`` worker."""
WORK_MS = 50.0


@dataclass(frozen=True)
class Row:
    """One worker setting: how it is started, what it runs, how many warm-up jobs it takes.
    Every row has two cores' worth of slots (two threads, children, pool or worker processes)."""

    group: str  # "noop", "cpu" or "throughput"
    label: str
    system: str  # "skiplock" or "celery"
    task: str
    warm: str
    args: tuple[str, ...]
    parties: int
    """Warm-up jobs, one per thread or child that runs jobs (the rendezvous waits for all)."""


ROWS = [
    Row("noop", "thread task, --concurrency 2", "skiplock", "noop", "warm",
        ("--concurrency", "2"), 2),
    Row("noop", "process task, --concurrency 2", "skiplock", "noop_p", "warm_p",
        ("--concurrency", "2"), 2),
    Row("noop", "prefork, -c 2", "celery", "noop", "warm", ("-c", "2"), 2),
    Row("cpu", "thread task, --concurrency 2", "skiplock", "burn", "warm",
        ("--concurrency", "2"), 2),
    Row("cpu", "process task, --concurrency 2", "skiplock", "burn_p", "warm_p",
        ("--concurrency", "2"), 2),
    Row("cpu", "prefork, -c 2", "celery", "burn", "warm", ("-c", "2"), 2),
    Row("throughput", "--processes 2, thread tasks", "skiplock", "burn", "warm",
        ("--processes", "2"), 2 * DEFAULT_CONCURRENCY),
    Row("throughput", "--processes 2 --prefetch 0, thread tasks", "skiplock", "burn", "warm",
        ("--processes", "2", "--prefetch", "0"), 2 * DEFAULT_CONCURRENCY),
    Row("throughput", "one worker, process tasks, --child-processes 2", "skiplock", "burn_p",
        "warm_p", ("--child-processes", "2"), 2),
]  # fmt: skip


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(ROOT), str(ROOT / "src")])
    env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **extra}
    if "SKIPLOCK_DATABASE_URL" not in extra:
        env.pop("SKIPLOCK_DATABASE_URL", None)
    return env


async def stop(worker: asyncio.subprocess.Process, what: str) -> None:
    """SIGTERM, as a deployment stops it; it must exit 0 (a clean shutdown)."""
    if worker.returncode is None:
        worker.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(worker.wait(), 60)
    if code != 0:
        raise RuntimeError(f"{what} exited {code} after SIGTERM")


def figures(records: list[list[float]], launched: float, jobs: int) -> dict[str, Any]:
    """What one drain's measured jobs recorded, ``[n, started, ended, pid]`` each."""
    numbers = {int(r[0]) for r in records}
    if len(records) != jobs or numbers != set(range(1, jobs + 1)):
        raise RuntimeError(f"{len(records)} records of {len(numbers)} jobs (expected {jobs})")
    first = min(r[1] for r in records)
    last = max(r[2] for r in records)
    return {
        "ready_s": first - launched,
        "drain_s": last - first,
        "in_task_ms": 1000 * statistics.median(r[2] - r[1] for r in records),
        "split": "+".join(
            str(n) for n in sorted(Counter(int(r[3]) for r in records).values(), reverse=True)
        ),
    }


# -- skiplock -------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def fresh_database(base: str) -> AsyncIterator[str]:
    """A fresh database on ``base``'s server, migrated as a user would; dropped afterwards."""
    name = f"bench_w18_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(base)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = with_database(base, name)
        migrate = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "skiplock", "migrate", SKIPLOCK_APP,
            env=_env(SKIPLOCK_DATABASE_URL=url), cwd=ROOT, stdout=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        if await migrate.wait() != 0:
            raise RuntimeError("skiplock migrate failed")
        yield url
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


INSERT = """
INSERT INTO skiplock_jobs (task, queue, args, kwargs, max_attempts, priority)
SELECT $1, 'default', CASE WHEN $2::float8 IS NULL THEN jsonb_build_array(g)
                           ELSE jsonb_build_array(g, $2::float8) END, '{}', 1, 0
FROM generate_series(1, $3) g
"""
WARM = """
INSERT INTO skiplock_jobs (task, queue, args, kwargs, max_attempts, priority)
SELECT $1, 'default', jsonb_build_array($2::int), '{}', 1, 10 FROM generate_series(1, $2)
"""
STATES = "SELECT state, attempt, count(*) AS n FROM skiplock_jobs GROUP BY state, attempt"


async def run_skiplock(base: str, row: Row, jobs: int, ms: float | None) -> dict[str, Any]:
    async with fresh_database(base) as url:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(WARM, row.warm, row.parties)
            await conn.execute(INSERT, row.task, ms, jobs)
            await conn.execute("ANALYZE skiplock_jobs")
            with tempfile.TemporaryDirectory(prefix="w18-") as gate:
                launched = now()
                worker = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "skiplock", "worker", SKIPLOCK_APP, *row.args,
                    "--log-level", "warning", cwd=ROOT,
                    env=_env(SKIPLOCK_DATABASE_URL=url, **{DIR_ENV: gate}),
                )  # fmt: skip
                try:
                    await wait_done(conn, jobs + row.parties, 120 + jobs * 0.5, worker)
                finally:
                    await stop(worker, "the skiplock worker")
            states = {(r["state"], r["attempt"]): r["n"] for r in await conn.fetch(STATES)}
            if states != {("succeeded", 1): jobs + row.parties}:
                raise RuntimeError(f"not every job succeeded once: {states}")
            records = [
                json.loads(r["result"])
                for r in await conn.fetch(
                    "SELECT result FROM skiplock_jobs WHERE task = $1", row.task
                )
            ]
            db_s = await conn.fetchval(
                "SELECT extract(epoch FROM max(finished_at) - min(attempted_at))::float8 "
                "FROM skiplock_jobs WHERE task = $1",
                row.task,
            )
        finally:
            await conn.close()
    got = figures(records, launched, jobs)
    got["db_drain_s"] = db_s
    got["once"] = f"{jobs} + {row.parties} warm-up succeeded, each on attempt 1 (table)"
    return got


async def wait_done(
    conn: asyncpg.Connection, total: int, timeout: float, worker: asyncio.subprocess.Process
) -> None:
    """Poll (20 ms) until ``total`` jobs have ended; RuntimeError past ``timeout`` s or when
    the worker exits first."""
    sql = "SELECT count(*) FROM skiplock_jobs WHERE state NOT IN ('pending', 'running')"
    deadline = time.monotonic() + timeout
    while (done := await conn.fetchval(sql)) < total:
        if worker.returncode is not None:
            raise RuntimeError(f"the worker exited {worker.returncode} with {done}/{total} done")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{done} of {total} jobs ended in {timeout:.0f} s")
        await asyncio.sleep(0.02)


# -- Celery ---------------------------------------------------------------------------------------


async def run_celery(broker: str, row: Row, jobs: int, ms: float | None) -> dict[str, Any]:
    import redis.asyncio as aioredis
    from celery import Celery

    queue = f"bench-w18-{uuid.uuid4().hex[:8]}"
    done_key = f"{queue}:done"
    client = Celery("w18-bench", broker=broker)
    client.conf.broker_connection_retry_on_startup = True
    r = aioredis.Redis.from_url(broker)
    try:

        def send() -> None:
            with client.producer_or_acquire() as producer:
                for _ in range(row.parties):
                    client.send_task(row.warm, (row.parties,), queue=queue, producer=producer)
                for n in range(1, jobs + 1):
                    args = (n,) if ms is None else (n, ms)
                    client.send_task(row.task, args, queue=queue, producer=producer)

        await asyncio.to_thread(send)
        with tempfile.TemporaryDirectory(prefix="w18-") as gate:
            launched = now()
            env = _env(**{
                "SKIPLOCK_BENCH_CELERY_BROKER": broker,
                "SKIPLOCK_BENCH_CELERY_QUEUE": queue,
                DIR_ENV: gate,
                # as root (a container), Celery warns at start-up: not what is measured
                "PYTHONWARNINGS": "ignore:You're running the worker with superuser",
            })  # fmt: skip
            worker = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "celery", "-A", CELERY_APP, "worker", *row.args,
                "--loglevel", "warning", cwd=ROOT, env=env, stdout=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + 120 + jobs * 0.5
                while (done := await r.llen(done_key)) < jobs:
                    if worker.returncode is not None:
                        raise RuntimeError(f"celery exited {worker.returncode} ({done}/{jobs})")
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{done} of {jobs} Celery jobs ran")
                    await asyncio.sleep(0.02)
            finally:
                await stop(worker, "the Celery worker")
        records = [json.loads(x) for x in await r.lrange(done_key, 0, -1)]
        left = await r.llen(queue)
        if left:
            raise RuntimeError(f"{left} messages left in the Celery queue")
    finally:
        # the run's keys: its records, its queue and kombu's binding of it
        bindings = [f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}"]
        await r.delete(done_key, queue, *bindings)
        await r.aclose()
        client.close()
    got = figures(records, launched, jobs)  # one record per job, none twice
    got["db_drain_s"] = None
    got["once"] = f"{jobs} records of {jobs} distinct jobs in Redis, the queue empty"
    return got


# -- the report -----------------------------------------------------------------------------------


def med(runs: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def table(
    group: str, jobs: int, work_ms: float, rows: list[Row], results: dict[Row, list[dict[str, Any]]]
) -> None:
    titles = {
        "noop": f"W18 no-op jobs: {jobs} queued, then drained (medians)",
        "cpu": f"W18 {work_ms:.0f} ms of pure-Python CPU a job: {jobs} queued, then drained "
        "(medians)",
        "throughput": f"W18 CPU-bound throughput, {work_ms:.0f} ms of CPU a job, 2 cores: "
        f"{jobs} queued, then drained (medians)",
    }
    print(f"\n{titles[group]}")
    print(
        "| worker | jobs/s | every run | wall ms/job | slot ms/job (x2) | above the work |"
        " in-task ms (p50) | drain s | drain s, db clock | ready s | jobs per process |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        runs = results[row]
        if not runs:
            continue
        drain = med(runs, "drain_s") or float("nan")
        wall = 1000 * drain / jobs
        slot = wall * 2  # two cores, two slots: the time each job holds one
        db = med(runs, "db_drain_s")
        every = ", ".join(f"{jobs / r['drain_s']:,.1f}" for r in runs)
        system = "Celery" if row.system == "celery" else "skiplock"
        print(
            f"| {system}: {row.label} | {jobs / drain:,.1f} | {every} | {wall:.2f} | "
            f"{slot:.2f} | {slot - work_ms:+.2f} | {med(runs, 'in_task_ms'):.2f} | "
            f"{drain:.2f} | {'-' if db is None else f'{db:.2f}'} | "
            f"{med(runs, 'ready_s'):.2f} | {runs[-1]['split']} |"
        )


async def main(args: argparse.Namespace) -> None:
    only = args.only.split(",")
    rows = [r for r in ROWS if r.group in only]
    sizes = {"noop": args.noop_jobs, "cpu": args.cpu_jobs, "throughput": args.cpu_jobs}
    results: dict[Row, list[dict[str, Any]]] = {r: [] for r in rows}
    for run in range(args.runs):
        for row in rows:
            jobs = sizes[row.group]
            ms = None if row.group == "noop" else args.work_ms
            if row.system == "celery":
                got = await run_celery(args.broker, row, jobs, ms)
            else:
                got = await run_skiplock(args.url, row, jobs, ms)
            results[row].append(got)
            print(
                f"run {run + 1}: {row.group}, {row.system} {row.label}: {jobs} jobs in "
                f"{got['drain_s']:.2f} s, {jobs / got['drain_s']:,.1f} jobs/s; {got['once']}; "
                f"load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    print(f"\nW18: process tasks, {args.runs} interleaved run(s); every job ran exactly once "
          "(checked per run, above)")  # fmt: skip
    for group in ("noop", "cpu", "throughput"):
        if group in only:
            work = 0.0 if group == "noop" else args.work_ms
            table(group, sizes[group], work, [r for r in rows if r.group == group], results)
    print(
        "\nwall ms/job: the drain (first measured start to last end, CLOCK_MONOTONIC as the jobs "
        "record it) over the jobs; slot ms/job: that times the 2 slots; above the work: less "
        "the job's CPU; in-task: a job's own start to end; ready: worker launched to the first "
        "measured start (start-up and warm-up); jobs per process: how the last run's measured jobs "
        "fell on the processes that ran them (worker processes, children, pool processes)"
    )
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.processes")
    p.add_argument("--url", default=os.environ.get("SKIPLOCK_BENCH_PG", DEFAULT_PG_URL))
    p.add_argument("--broker", default=DEFAULT_BROKER, help="Celery's Redis broker")
    p.add_argument("--noop-jobs", type=int, help="no-op jobs a drain (default 500; --quick 100)")
    p.add_argument("--cpu-jobs", type=int, help="CPU jobs a drain (default 100; --quick 20)")
    p.add_argument("--work-ms", type=float, default=WORK_MS, help="CPU a job spends (ms)")
    p.add_argument("--runs", type=int, help="interleaved runs (default 3; --quick 1)")
    p.add_argument("--only", default="noop,cpu,throughput", help="rows, comma-separated")
    p.add_argument("--quick", action="store_true", help="a smoke test: small sizes, one run")
    args = p.parse_args(argv)
    args.noop_jobs = args.noop_jobs or (100 if args.quick else 500)
    args.cpu_jobs = args.cpu_jobs or (20 if args.quick else 100)
    args.runs = args.runs or (1 if args.quick else 3)
    return args


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
