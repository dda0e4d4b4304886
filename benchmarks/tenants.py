"""Many tenants on one queue (issue 25): W12 hot tenant and W13 capped keys, on PostgreSQL
and SQLite, through skiplock's own CLI workers (``benchmarks/tenants_app.py``).

- **W12 hot tenant.** One key's 100,000 ready jobs are enqueued first and a worker process
  (``-c 20``) starts on them; once it runs, 99 keys x 10 jobs are enqueued in one batch. Each
  cold key's first-start delay (its first job's start minus the batch's commit, p50 and max)
  and the drain rate (all jobs, first start to last end) are read from the jobs' results. The
  same jobs without keys are the baseline: their cold jobs wait behind the whole backlog.
  Targets: every cold key's first job within 2 x the job time plus one claim round trip
  (here 2 x 5 ms + 5 ms: 15 ms); drain rate >= 85 % of the baseline's.
- **W14 ordered keys.** 100 keys x 1,000 jobs of 2 ms enqueued round-robin (each key's jobs
  interleaved with the others'), ``ordering_key`` per key, one in 20 failing its first attempt
  (retried after 50-200 ms), one worker process at ``-c 16``: whether every key's jobs
  finished in enqueue order, and the drain rate beside the same jobs without a key.
- **W13 capped keys.** 50 keys x 200 jobs of 10 ms, ``key_limit=2``, a supervisor of 4 worker
  processes (``--processes 4 -c 20``); once a third of the jobs are done one worker process is
  SIGKILLed (its supervisor frees its leases and starts another). The most jobs of one key
  whose recorded runs overlapped, target never above 2, and every job succeeded.

    .venv/bin/python -m benchmarks.tenants                 # full sizes, both databases
    .venv/bin/python -m benchmarks.tenants --quick         # 10,000 hot jobs, 20 keys x 50
    .venv/bin/python -m benchmarks.tenants --only W13 --databases sqlite --runs 3

Results also land in ``benchmarks/results/tenants-TIMESTAMP.json``; method and reading in
benchmarks/HISTORY.md, "Many tenants".
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import psutil

import skiplock
from skiplock._job import NewJob

from .common import DEFAULT_PG_URL, percentile, with_database

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
APP = "benchmarks.tenants_app:app"
BATCH = 10_000


def job(task: str, key: str, ms: float, *, keyed: bool = True) -> NewJob:
    """A job of tenants_app's ``task`` (its key and limit as the task declares them)."""
    return NewJob(
        task,
        "default",
        json.dumps([key, ms]),
        "{}",
        0,
        3,
        concurrency_key=key if keyed else None,
        key_limit=2 if task == "capped" else None,
    )


async def start_worker(url: str, *extra: str, burst: bool = True) -> asyncio.subprocess.Process:
    env = {**os.environ, "SKIPLOCK_DATABASE_URL": url, "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"}
    command = [sys.executable, "-m", "skiplock", "worker", APP, *(["--burst"] if burst else [])]
    command.append("--log-level")
    return await asyncio.create_subprocess_exec(
        *command, "error", *extra, env=env, cwd=ROOT, stdout=asyncio.subprocess.DEVNULL
    )


async def succeeded(app: skiplock.App) -> int:
    return (await app.counts()).get("succeeded", 0)


async def runs_of(url: str, task: str, key_at: int = 0) -> list[tuple[str, float, float, int, int]]:
    """(key, start, end, attempt, id) of every succeeded job of ``task``, from its result;
    the key is the job's argument at ``key_at``."""
    if url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            rows = conn.execute(
                "SELECT args, result, attempt, id FROM skiplock_jobs"
                " WHERE task = ? AND state = 'succeeded'",
                (task,),
            ).fetchall()
        finally:
            conn.close()
    else:
        pg = await asyncpg.connect(url)
        try:
            found = await pg.fetch(
                "SELECT args::text, result::text, attempt, id FROM skiplock_jobs"
                " WHERE task = $1 AND state = 'succeeded'",
                task,
            )
            rows = [tuple(r) for r in found]
        finally:
            await pg.close()
    out = []
    for args, result, attempt, job_id in rows:
        key = json.loads(args)[key_at]
        start, end = json.loads(result)
        out.append((key, float(start), float(end), int(attempt), int(job_id)))
    return out


async def w12(url: str, *, keyed: bool, hot: int, cold_keys: int, each: int) -> dict[str, Any]:
    task, ms = ("tenant" if keyed else "untenanted"), 5.0
    app = skiplock.App(url)
    await app.migrate()
    try:
        for start in range(0, hot, BATCH):
            size = min(BATCH, hot - start)
            await app.enqueue_many([job(task, "hot", ms, keyed=keyed)] * size)
        worker = await start_worker(url, "-c", "20")
        while await succeeded(app) < min(1_000, hot // 4):  # the worker is in its stride
            await asyncio.sleep(0.02)
        cold = [job(task, f"cold{k:02}", ms, keyed=keyed) for k in range(cold_keys)] * each
        await app.enqueue_many(cold)
        committed = time.time()
        await worker.wait()
    finally:
        await app.close()
    runs = await runs_of(url, task)
    first: dict[str, float] = {}
    for key, started, *_ in runs:
        if key != "hot":
            first[key] = min(first.get(key, started), started)
    delays = [(t - committed) * 1000 for t in first.values()]
    span = max(r[2] for r in runs) - min(r[1] for r in runs)
    return {
        "keyed": keyed,
        "jobs": len(runs),
        "expected": hot + cold_keys * each,
        "drain_per_s": len(runs) / span,
        "cold_first_p50_ms": percentile(delays, 50),
        "cold_first_max_ms": max(delays),
        "cold_keys_started": len(first),
    }


def most_at_once(runs: list[tuple[str, float, float, int, int]]) -> dict[str, int]:
    """Per key, the most runs whose [start, end) intervals overlapped (a sweep)."""
    events: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for key, start, end, *_ in runs:
        events[key] += [(start, 1), (end, -1)]
    most = {}
    for key, marks in events.items():
        now = top = 0
        for _, step in sorted(marks, key=lambda m: (m[0], m[1])):  # an end before a start
            now += step
            top = max(top, now)
        most[key] = top
    return most


async def w13(url: str, *, keys: int, each: int, kill: bool) -> dict[str, Any]:
    ms, total = 10.0, keys * each
    app = skiplock.App(url)
    await app.migrate()
    killed = None
    try:
        jobs = [job("capped", f"k{k:02}", ms) for k in range(keys)] * each
        for start in range(0, total, BATCH):
            await app.enqueue_many(jobs[start : start + BATCH])
        supervisor = await start_worker(url, "--processes", "4", "-c", "20")
        if kill:
            while await succeeded(app) < total // 3:
                await asyncio.sleep(0.01)
            children = psutil.Process(supervisor.pid).children()
            if children:
                killed = children[0].pid
                os.kill(killed, signal.SIGKILL)
        await supervisor.wait()
        left = await app.counts()
    finally:
        await app.close()
    runs = await runs_of(url, "capped")
    most = most_at_once(runs)
    return {
        "jobs": len(runs),
        "expected": total,
        "not_succeeded": {k: v for k, v in left.items() if k != "succeeded" and v},
        "killed_pid": killed,
        "retried": sum(1 for r in runs if r[3] > 1),
        "most_at_once": max(most.values()),
        "keys_at_two": sum(1 for v in most.values() if v == 2),
    }


async def w14(url: str, *, ordered: bool, keys: int, each: int) -> dict[str, Any]:
    task, ms = ("ordered" if ordered else "unordered"), 2.0
    app = skiplock.App(url)
    await app.migrate()
    try:
        jobs = [
            NewJob(task, "default", json.dumps([f"o{k:03}", n, ms]), "{}", 0, 5,
                   concurrency_key=f"o{k:03}" if ordered else None,
                   key_limit=1 if ordered else None, key_order="block" if ordered else None)
            for n in range(each) for k in range(keys)
        ]  # fmt: skip
        for start in range(0, len(jobs), BATCH):
            await app.enqueue_many(jobs[start : start + BATCH])
        # burst workers, one after another until every job succeeded: a burst ends when
        # nothing is due, and a retry (50-200 ms) may be all that is left, or hold every
        # ordered key's next jobs (a worker that stays up instead spends this workload's
        # PostgreSQL drain moving the backlog between live segments: 517 jobs/s)
        bursts = 0
        while await succeeded(app) < len(jobs):
            await (await start_worker(url, "-c", "16")).wait()
            bursts += 1
        left = await app.counts()
    finally:
        await app.close()
    runs = await runs_of(url, task)
    by_key: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for key, _, end, _, job_id in runs:
        by_key[key].append((end, job_id))
    out_of_order = sum(
        1 for done in by_key.values() if [i for _, i in sorted(done)] != sorted(i for _, i in done)
    )
    span = max(r[2] for r in runs) - min(r[1] for r in runs)
    return {
        "ordered": ordered,
        "jobs": len(runs),
        "expected": keys * each,
        "not_succeeded": {k: v for k, v in left.items() if k != "succeeded" and v},
        "retried": sum(1 for r in runs if r[3] > 1),
        "keys_out_of_order": out_of_order,
        "bursts": bursts,
        "drain_per_s": len(runs) / span,
    }


async def w15(url: str, *, enqueues: int, within_s: float) -> dict[str, Any]:
    """``enqueues`` debounced enqueues of one key (``debounce=0.2``) paced evenly over
    ``within_s`` while a worker process runs: how many runs, with whose arguments, how long
    after the last enqueue, and what a debounced enqueue costs."""
    from .tenants_app import debounced

    app = skiplock.App(url)
    await app.migrate()
    worker = await start_worker(url, "-c", "4", burst=False)  # up until the run is done
    try:
        latencies: list[float] = []
        ids: set[int] = set()
        begin = time.perf_counter()
        for n in range(enqueues):
            due = begin + within_s * n / enqueues
            if (wait := due - time.perf_counter()) > 0:
                await asyncio.sleep(wait)
            sent = time.perf_counter()
            ids.add((await app.enqueue_many([debounced.prepare("k", n)]))[0].id)
            latencies.append((time.perf_counter() - sent) * 1000)
        last_enqueue = time.time()
        spent = time.perf_counter() - begin
        while await succeeded(app) < len(ids):
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # long enough for a second run, were one coming
        counts = await app.counts()
    finally:
        if worker.returncode is None:
            worker.send_signal(signal.SIGTERM)
        await worker.wait()
        await app.close()
    rows = await runs_of(url, "debounced", key_at=1)
    return {
        "enqueues": enqueues,
        "enqueue_s": spent,
        "jobs_written": len(ids),
        "runs": len(rows),
        "last_arguments": [int(r[0]) for r in rows] == [enqueues - 1],
        "start_after_last_enqueue_ms": (rows[0][1] - last_enqueue) * 1000 if rows else None,
        "left": {k: v for k, v in counts.items() if k != "succeeded" and v},
        "enqueue_p50_ms": percentile(latencies, 50),
        "enqueue_p99_ms": percentile(latencies, 99),
    }


async def fresh(database: str) -> tuple[str, Any]:
    """A URL of a new database (and how to drop it after)."""
    if database == "sqlite":
        folder = tempfile.mkdtemp(prefix="tenants-")
        return f"sqlite:///{folder}/jobs.db", None
    name = f"tenants_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(DEFAULT_PG_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return with_database(DEFAULT_PG_URL, name), name


async def drop(name: str | None) -> None:
    if name is None:
        return
    admin = await asyncpg.connect(DEFAULT_PG_URL)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def main(args: argparse.Namespace) -> None:
    hot, cold, each = (10_000, 99, 10) if args.quick else (100_000, 99, 10)
    keys, per_key = (20, 50) if args.quick else (50, 200)
    ordered_keys, per_ordered = (20, 100) if args.quick else (100, 1_000)
    results: dict[str, Any] = {"runs": args.runs, "quick": args.quick, "rows": []}
    for database in args.databases.split(","):
        for _ in range(args.runs):
            runs: list[tuple[str, Callable[[str], Awaitable[dict[str, Any]]]]] = []
            if "W12" in args.only:
                runs += [
                    ("W12", functools.partial(w12, keyed=k, hot=hot, cold_keys=cold, each=each))
                    for k in (True, False)
                ]
            if "W14" in args.only:
                runs += [
                    ("W14", functools.partial(w14, ordered=o, keys=ordered_keys, each=per_ordered))
                    for o in (True, False)
                ]
            if "W13" in args.only:
                runs.append(("W13", functools.partial(w13, keys=keys, each=per_key, kill=True)))
            if "W15" in args.only:
                runs.append(("W15", functools.partial(w15, enqueues=1_000, within_s=1.0)))
            for workload, measure in runs:
                url, name = await fresh(database)
                try:
                    row = await measure(url)
                finally:
                    await drop(name)
                results["rows"].append({"workload": workload, "database": database, **row})
                print(json.dumps(results["rows"][-1]), flush=True)
    print(report(results["rows"]))
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"tenants-{stamp}.json").write_text(json.dumps(results, indent=1))


def _median(rows: list[dict[str, Any]], field: str) -> float:
    return statistics.median(r[field] for r in rows)


def _split(
    rows: list[dict[str, Any]], workload: str, database: str, flag: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A workload's runs on one database: those with ``flag`` set, and its baseline's."""
    mine = [r for r in rows if r["workload"] == workload and r["database"] == database]
    return [r for r in mine if r[flag]], [r for r in mine if not r[flag]]


def report(rows: list[dict[str, Any]]) -> str:
    """The tables, medians of the runs, with the targets pass/fail."""
    lines = []
    for database in sorted({r["database"] for r in rows}):
        keyed, plain = _split(rows, "W12", database, "keyed")
        if keyed and plain:
            ratio = _median(keyed, "drain_per_s") / _median(plain, "drain_per_s")
            worst = max(r["cold_first_max_ms"] for r in keyed)
            lines += [
                f"W12 hot tenant, {database} ({len(keyed)} runs, medians)",
                "| jobs | drain jobs/s | cold first start p50 | cold first start max |",
                "| --- | ---: | ---: | ---: |",
                f"| keyed | {_median(keyed, 'drain_per_s'):,.0f} | "
                f"{_median(keyed, 'cold_first_p50_ms'):.1f} ms | "
                f"{_median(keyed, 'cold_first_max_ms'):.1f} ms |",
                f"| without keys | {_median(plain, 'drain_per_s'):,.0f} | "
                f"{_median(plain, 'cold_first_p50_ms'):.1f} ms | "
                f"{_median(plain, 'cold_first_max_ms'):.1f} ms |",
                f"drain keyed / without keys: {ratio:.0%} (target >= 85 %: "
                f"{'met' if ratio >= 0.85 else 'NOT met'}); worst cold first start of any run "
                f"{worst:.1f} ms (target <= 15 ms: {'met' if worst <= 15 else 'NOT met'})",
                "",
            ]
        in_order, loose = _split(rows, "W14", database, "ordered")
        if in_order and loose:
            ratio = _median(in_order, "drain_per_s") / _median(loose, "drain_per_s")
            wrong = sum(r["keys_out_of_order"] for r in in_order)
            done = all(r["jobs"] == r["expected"] for r in in_order)
            lines += [
                f"W14 ordered keys, {database} ({len(in_order)} runs, medians)",
                "| jobs | drain jobs/s | retried | keys finished out of enqueue order |",
                "| --- | ---: | ---: | ---: |",
                f"| ordered | {_median(in_order, 'drain_per_s'):,.0f} | "
                f"{_median(in_order, 'retried'):.0f} | {wrong} |",
                f"| without keys | {_median(loose, 'drain_per_s'):,.0f} | "
                f"{_median(loose, 'retried'):.0f} | "
                f"{sum(r['keys_out_of_order'] for r in loose)} |",
                f"ordered / without keys: {ratio:.0%}; every key in enqueue order: "
                f"{'met' if wrong == 0 and done else 'NOT met'}",
                "",
            ]
        w13_rows = [r for r in rows if r["workload"] == "W13" and r["database"] == database]
        if w13_rows:
            most = max(r["most_at_once"] for r in w13_rows)
            complete = all(r["jobs"] == r["expected"] for r in w13_rows)
            lines += [
                f"W13 capped keys, {database} ({len(w13_rows)} runs)",
                "| run | jobs succeeded | retried after the kill | most of one key at once |"
                " keys that reached 2 |",
                "| ---: | ---: | ---: | ---: | ---: |",
                *[
                    f"| {i} | {r['jobs']:,} / {r['expected']:,} | {r['retried']} | "
                    f"{r['most_at_once']} | {r['keys_at_two']} |"
                    for i, r in enumerate(w13_rows, 1)
                ],
                f"most of one key at once in any run: {most} (target <= 2: "
                f"{'met' if most <= 2 and complete else 'NOT met'})",
                "",
            ]
        w15_rows = [r for r in rows if r["workload"] == "W15" and r["database"] == database]
        if w15_rows:
            met = all(r["runs"] == 1 and r["last_arguments"] for r in w15_rows)
            lines += [
                f"W15 debounce, {database} ({len(w15_rows)} runs)",
                "| run | enqueues | over | jobs written | runs | with the last arguments |"
                " start after the last enqueue | enqueue p50 | enqueue p99 |",
                "| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
                *[
                    f"| {i} | {r['enqueues']:,} | {r['enqueue_s']:.2f} s | {r['jobs_written']} | "
                    f"{r['runs']} | {'yes' if r['last_arguments'] else 'NO'} | "
                    f"{r['start_after_last_enqueue_ms']:.0f} ms | "
                    f"{r['enqueue_p50_ms']:.2f} ms | {r['enqueue_p99_ms']:.2f} ms |"
                    for i, r in enumerate(w15_rows, 1)
                ],
                f"exactly one run, with the last arguments: {'met' if met else 'NOT met'}",
                "",
            ]
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--only", default="W12,W13,W14,W15")
    parser.add_argument("--databases", default="postgres,sqlite")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
