"""Many one-job keys (issue 42): how fast a worker drains N jobs that each have a key of their
own, beside the same jobs without keys, on PostgreSQL; A/B between checkouts in one run.

Each measurement is a child process on the code of one ``--src`` (a checkout's ``src``): it
makes a schema of its own, enqueues N no-op jobs in one ``enqueue_many`` (each job's
``concurrency_key`` its own, or none), never runs ANALYZE (a user starts a worker on a fresh
backlog; the plans are made from what the server knows then), and drains them:

- ``burst`` (the default): an in-process ``Worker`` at its defaults in burst mode, timed from
  its start to its end;
- ``cli``: the CLI worker as a user starts it (``skiplock worker APP``, every setting at its
  default), timed from its start until the last job succeeded (polled every 20 ms), then
  stopped with SIGTERM.

The children run one at a time, interleaved (each run goes through every checkout and kind
before the next run), so load on a shared machine falls on all of them alike; the table
gives each one's median and every run.

    .venv/bin/python -m benchmarks.keys_drain                          # this checkout, 3 runs
    .venv/bin/python -m benchmarks.keys_drain --src ../main/src --src src --runs 5
    .venv/bin/python -m benchmarks.keys_drain --mode cli --jobs 20000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import asyncpg

from .common import DEFAULT_PG_URL

ROOT = Path(__file__).resolve().parent.parent
APP = "benchmarks.keys_drain:app"

if os.environ.get("KEYS_DRAIN_CHILD"):
    import skiplock

    app = skiplock.App()

    @app.task(name="keyed", concurrency_key=lambda n: f"k{n:07d}")
    async def keyed(n: int) -> None:
        """A no-op job with a key of its own."""

    @app.task(name="plain")
    async def plain(n: int) -> None:
        """The same job without a key."""


async def child(url: str, kind: str, jobs: int, mode: str) -> dict[str, float]:
    """One drain on this process's code; its seconds and rate."""
    from skiplock._worker.worker import Worker

    schema = f"keys_drain_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(url)
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    target = f"{url}{'&' if '?' in url else '?'}schema={schema}"
    try:
        app.url = target
        await app.migrate()
        task = keyed if kind == "keyed" else plain
        await app.enqueue_many(task.prepare(n) for n in range(jobs))
        started = time.perf_counter()
        if mode == "burst":
            await Worker(app, scheduler=False).run(burst=True)
        else:
            await cli_drain(admin, schema, target, jobs)
        seconds = time.perf_counter() - started
        done = await admin.fetchval(
            f"SELECT count(*) FROM \"{schema}\".skiplock_jobs WHERE state = 'succeeded'"
        )
        assert done == jobs, (done, jobs)
        await app.close()
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()
    return {"seconds": seconds, "per_s": jobs / seconds}


async def cli_drain(admin: asyncpg.Connection, schema: str, url: str, jobs: int) -> None:
    """``skiplock worker APP`` at its defaults until every job succeeded, then SIGTERM."""
    env = {**os.environ, "SKIPLOCK_DATABASE_URL": url}
    worker = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "skiplock", "worker", APP, "--log-level", "error"],
        env=env,
        cwd=ROOT,
    )
    count = f"SELECT count(*) FROM \"{schema}\".skiplock_jobs WHERE state = 'succeeded'"
    try:
        while await admin.fetchval(count) < jobs:
            await asyncio.sleep(0.02)
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 30)


def measure(src: str, kind: str, args: argparse.Namespace) -> dict[str, float]:
    env = {
        **os.environ,
        "KEYS_DRAIN_CHILD": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(Path(src).resolve())]),
    }
    command = [sys.executable, "-m", "benchmarks.keys_drain", "--child", kind]
    command += ["--url", args.url, "--jobs", str(args.jobs), "--mode", args.mode]
    out = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{src} {kind}: {out.stderr}")
    result: dict[str, float] = json.loads(out.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("SKIPLOCK_BENCH_PG", DEFAULT_PG_URL))
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mode", choices=("burst", "cli"), default="burst")
    parser.add_argument("--src", action="append", help="a checkout's src (repeatable)")
    parser.add_argument("--child", choices=("keyed", "plain"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args.url, args.child, args.jobs, args.mode))))
        return
    sources = args.src or [str(ROOT / "src")]
    results: dict[tuple[str, str], list[float]] = {}
    for run in range(args.runs):
        for src in sources:
            for kind in ("plain", "keyed"):
                seconds = measure(src, kind, args)["seconds"]
                results.setdefault((src, kind), []).append(seconds)
                print(f"run {run + 1}: {src} {kind}: {seconds:.2f} s", flush=True)
    print(f"\n{args.jobs:,} jobs, {args.mode}, seconds (median; every run)")
    for (src, kind), runs in results.items():
        each = ", ".join(f"{s:.2f}" for s in runs)
        rate = args.jobs / statistics.median(runs)
        print(f"  {src:40} {kind:6} {statistics.median(runs):6.2f}  ({each})  {rate:,.0f}/s")


if __name__ == "__main__":
    main()
