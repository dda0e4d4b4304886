"""Storage over time (issue 24): W8 held horizon, W11 soak, and the clean phase at 60 % of the
peak, each run through skiplock itself on a PostgreSQL cluster of the bench's own with stock
settings (benchmarks/cluster.py: autovacuum on, stock cost limits). W9 (active readers) and its
control W9cpu are in benchmarks/readers.py (issue 44), run as the public harness runs them.

One run measures the clean **peak** first: the rate one worker process at the defaults
(``skiplock worker benchmarks.skiplock_app:app``) completes jobs while a producer process
floods it, read from the table past the start-up. Then each workload gets a fresh database and runs

- a **producer** process enqueueing no-op jobs through ``enqueue_many`` at a fixed rate
  (credited on real elapsed time: a slow round catches up in the next one),
- one **worker** process at the defaults (``--log-level warning``),
- a **sampler** reading ``n_dead_tup`` of each skiplock table every second,

through its phases, whose boundaries are taken on the database clock:

- W8: clean, then one session holding ``BEGIN; SELECT txid_current();`` idle, then recovery;
- clean60: one clean phase at 60 % of the peak;
- W11: one long phase at 70 %, its first and last windows compared.

Afterwards (the worker stopped) each phase is read back from the table: completions (rows
finished in the phase) against the offered rate, and pickup latency (``attempted_at -
run_at``: claimed minus due, both by the database clock) p50/p99. Table and index sizes are
read at each phase's end. The targets of issue 24 are printed pass/fail beside the tables.

    .venv/bin/python -m benchmarks.horizon                  # 2/10/2 min phases, 30 min soak
    .venv/bin/python -m benchmarks.horizon --quick          # 20/60/20 s, 5 min soak
    .venv/bin/python -m benchmarks.horizon --workloads W8 --runs 3

Needs root (pg_createcluster). Results also land in benchmarks/results/horizon-*.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from .cluster import create_database, hold_horizon, settings, stock_cluster

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
TICK_S = 0.01
SAMPLE_S = 1.0
MAX_ROUND = 10_000
"""Jobs one producer round enqueues at most (a flood's rounds stay short)."""
FLOOD_RATE = 1_000_000.0
"""The producer's rate while the peak is measured: more than it can send."""
WORKER_ARGS: list[str] = []
"""Options every worker process of the run gets (``--worker-args``): the same code measured
with a setting and without, e.g. ``--vacuum-interval 0``."""
HOT_DEAD_BOUND = 50_000
"""Issue 24: dead tuples on the hot path at any time in the clean phase at the peak rate."""


# -- the processes -------------------------------------------------------------------------------


async def produce(url: str, rate: float, seconds: float) -> None:
    """The producer process: ``rate`` no-op jobs a second for ``seconds`` (or until SIGTERM),
    through skiplock."""
    os.environ["SKIPLOCK_DATABASE_URL"] = url
    from benchmarks.skiplock_app import app, noop

    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    sent, start = 0, time.monotonic()
    while (elapsed := time.monotonic() - start) < seconds and not stopping.is_set():
        due = min(int(elapsed * rate) - sent, MAX_ROUND)  # a deficit is carried, not lost
        if due > 0:
            await app.enqueue_many(noop.prepare() for _ in range(due))
            sent += due
        await asyncio.sleep(TICK_S)
    await app.close()
    print(json.dumps({"sent": sent, "seconds": time.monotonic() - start}), flush=True)


def _env(url: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "SKIPLOCK_DATABASE_URL": url, "PYTHONPATH": path}


async def start_worker(url: str, *extra: str) -> asyncio.subprocess.Process:
    """One worker process at the defaults, logging warnings only."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skiplock", "worker", "benchmarks.skiplock_app:app",
        "--log-level", "warning", *WORKER_ARGS, *extra,
        env=_env(url), cwd=ROOT, stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


async def start_producer(url: str, rate: float, seconds: float) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.horizon", "--produce", url, str(rate), str(seconds),
        env=_env(url), cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def migrate(url: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skiplock", "migrate", "benchmarks.skiplock_app:app",
        env=_env(url), cwd=ROOT, stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    if await proc.wait() != 0:
        raise RuntimeError("skiplock migrate failed")


# -- the peak ------------------------------------------------------------------------------------


async def peak(url: str, seconds: float) -> float:
    """The clean peak: jobs a second one default worker process completes while a producer
    process floods it (both on this machine's cores, as in every workload), read from the
    table over the last two thirds of ``seconds`` (past the start-up)."""
    await migrate(url)
    conn = await asyncpg.connect(url)
    worker = await start_worker(url)
    producer = await start_producer(url, FLOOD_RATE, seconds)
    try:
        started = await conn.fetchval("SELECT clock_timestamp()")
        await asyncio.sleep(seconds / 3)
        steady = await conn.fetchval("SELECT clock_timestamp()")
        await producer.communicate()
        ended = await conn.fetchval("SELECT clock_timestamp()")
        done = await conn.fetchval(
            "SELECT count(*) FROM skiplock_jobs WHERE finished_at >= $1 AND finished_at < $2",
            steady,
            ended,
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        await worker.wait()
        await conn.close()
    assert started < steady
    return float(done) / (ended - steady).total_seconds()


# -- one workload --------------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    seconds: float
    held: str | None = None
    """What holds the horizon back in this phase: "idle", "readers" or None ("cpu": the
    control that holds nothing and takes the CPU)."""
    started: Any = None
    ended: Any = None
    dead_max: dict[str, int] = field(default_factory=dict)
    sizes: dict[str, dict[str, int]] = field(default_factory=dict)


DEAD_SQL = """
SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE relname LIKE 'skiplock%'
"""
SIZES_SQL = """
SELECT c.relname, pg_table_size(c.oid) AS table_bytes, pg_indexes_size(c.oid) AS index_bytes
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND c.relname LIKE 'skiplock%' AND n.nspname = current_schema()
"""
PHASE_SQL = """
SELECT count(*) FILTER (WHERE finished_at >= $1 AND finished_at < $2) AS completed,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM attempted_at - run_at))
           FILTER (WHERE attempted_at >= $1 AND attempted_at < $2) AS p50,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM attempted_at - run_at))
           FILTER (WHERE attempted_at >= $1 AND attempted_at < $2) AS p99
FROM skiplock_jobs
"""


class Workload:
    """One workload's phases at ``rate`` jobs a second on a fresh database."""

    def __init__(self, url: str, rate: float, phases: list[Phase]) -> None:
        self.url, self.rate, self.phases = url, rate, phases
        self.current: Phase = phases[0]
        self.stop = asyncio.Event()

    async def sample(self) -> None:
        conn = await asyncpg.connect(self.url)
        try:
            while not self.stop.is_set():
                segments = 0  # the live partition's segments summed (migration 12)
                for row in await conn.fetch(DEAD_SQL):
                    name, dead = row["relname"], int(row["n_dead_tup"])
                    self.current.dead_max[name] = max(self.current.dead_max.get(name, 0), dead)
                    if name.startswith("skiplock_jobs_live_"):
                        segments += dead
                if segments:
                    hot = max(self.current.dead_max.get("skiplock_jobs_live", 0), segments)
                    self.current.dead_max["skiplock_jobs_live"] = hot
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), SAMPLE_S)
        finally:
            await conn.close()

    async def run(self) -> list[dict[str, Any]]:
        await migrate(self.url)
        conn = await asyncpg.connect(self.url)
        total = sum(p.seconds for p in self.phases)
        worker = await start_worker(self.url)
        producer = await start_producer(self.url, self.rate, total)
        sampler = asyncio.create_task(self.sample())
        try:
            for phase in self.phases:
                self.current = phase
                phase.started = await conn.fetchval("SELECT clock_timestamp()")
                if phase.held:
                    tables = [r["relname"] for r in await conn.fetch(SIZES_SQL)]
                    await hold_horizon(self.url, phase.held, phase.seconds, tables)
                else:
                    await asyncio.sleep(phase.seconds)
                phase.ended = await conn.fetchval("SELECT clock_timestamp()")
                phase.sizes = {
                    r["relname"]: {"table": r["table_bytes"], "index": r["index_bytes"]}
                    for r in await conn.fetch(SIZES_SQL)
                }
            out, _ = await producer.communicate()
            sent = json.loads(out.decode().strip().splitlines()[-1])["sent"]
        finally:
            self.stop.set()
            await sampler
            if worker.returncode is None:
                worker.send_signal(signal.SIGTERM)
            await worker.wait()
            if producer.returncode is None:
                producer.kill()
                await producer.wait()
        try:
            rows = []
            for phase in self.phases:
                got = await conn.fetchrow(PHASE_SQL, phase.started, phase.ended)
                span = (phase.ended - phase.started).total_seconds()
                rows.append(self.row(phase, got, span))
        finally:
            await conn.close()
        rows[-1]["sent"] = sent
        return rows

    def row(self, phase: Phase, got: asyncpg.Record, span: float) -> dict[str, Any]:
        # the job table's partitions summed (a partitioned parent has no storage of its own);
        # the hot path is the live partition where the table is partitioned, else the table
        parts = [v for k, v in phase.sizes.items() if k.startswith("skiplock_jobs")]
        jobs = {k: sum(v[k] for v in parts) for k in ("table", "index")}
        hot = "skiplock_jobs_live" if "skiplock_jobs_live" in phase.dead_max else "skiplock_jobs"
        segmented = any(k.startswith("skiplock_jobs_live_") for k in phase.dead_max)
        return {
            "phase": phase.name,
            "seconds": round(span, 1),
            "offered/s": round(self.rate),
            "completed/s": round(got["completed"] / span),
            "completed %": round(100 * got["completed"] / span / self.rate, 1),
            "pickup p50 ms": _ms(got["p50"]),
            "pickup p99 ms": _ms(got["p99"]),
            "dead max (hot)": phase.dead_max.get(hot, 0),
            "dead max (all)": sum(
                v
                for k, v in phase.dead_max.items()
                # the segments' sum is counted by segment
                if not (k == "skiplock_jobs_live" and segmented)
            ),
            "jobs table MB": round(jobs["table"] / 2**20, 1),
            "jobs indexes MB": round(jobs["index"] / 2**20, 1),
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def windows(soak_s: float, window_s: float) -> list[Phase]:
    """W11: the soak cut into windows, so the first and the last can be compared."""
    count = max(2, round(soak_s / window_s))
    return [Phase(f"{i * window_s / 60:.0f}-{(i + 1) * window_s / 60:.0f} min", window_s)
            for i in range(count)]  # fmt: skip


# -- the report ----------------------------------------------------------------------------------


def table(rows: list[dict[str, Any]]) -> str:
    keys = [k for k in rows[0] if k != "sent"]
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    out += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(out)


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def horizon_targets(name: str, runs: list[list[dict[str, Any]]]) -> list[tuple[str, str, str]]:
    """Issue 24's bounds for W8, on the median over runs."""
    clean = [r[0] for r in runs]
    held = [r[1] for r in runs]
    completed = statistics.median(p["completed %"] for p in held)
    ratio = statistics.median(
        (h["pickup p99 ms"] or 0) / max(c["pickup p99 ms"] or 1e-9, 1e-9)
        for c, h in zip(clean, held, strict=True)
    )
    dead = statistics.median(p["dead max (hot)"] for p in clean)
    return [
        (f"{name}: completions through the held phase >= 95 % of offered", f"{completed}%",
         verdict(completed >= 95)),
        (f"{name}: held pickup p99 <= 2x the clean phase's", f"{ratio:.2f}x",
         verdict(ratio <= 2)),
        (f"{name}: dead tuples on the hot path in the clean phase <= {HOT_DEAD_BOUND:,}",
         f"{dead:,}", verdict(dead <= HOT_DEAD_BOUND)),
    ]  # fmt: skip


def soak_targets(runs: list[list[dict[str, Any]]]) -> list[tuple[str, str, str]]:
    first = statistics.median(r[0]["completed/s"] for r in runs)
    last = statistics.median(r[-1]["completed/s"] for r in runs)
    p99_first = statistics.median(r[0]["pickup p99 ms"] or 0 for r in runs)
    p99_last = statistics.median(r[-1]["pickup p99 ms"] or 0 for r in runs)
    drift = p99_last / p99_first - 1 if p99_first else float("inf")
    return [
        ("W11: last window's throughput >= 95 % of the first's", f"{last / first:.0%}",
         verdict(last >= 0.95 * first)),
        ("W11: last window's pickup p99 within 20 % of the first's", f"{drift:+.0%}",
         verdict(abs(drift) <= 0.2)),
    ]  # fmt: skip


async def main(args: argparse.Namespace) -> None:
    quick = args.quick
    clean_s, held_s, recovery_s = (20, 60, 20) if quick else (120, 600, 120)
    soak_s, window_s = (300, 60) if quick else (1800, 300)
    wanted = args.workloads.split(",")
    report: dict[str, Any] = {"started": time.strftime("%Y%m%d-%H%M%S"), "workloads": {}}
    targets: list[tuple[str, str, str]] = []
    with stock_cluster() as cluster:
        report["settings"] = await settings(cluster.url)
        print("server settings:", ", ".join(f"{k}={v}" for k, v in report["settings"].items()))
        WORKER_ARGS[:] = shlex.split(args.worker_args)
        report["worker_args"] = WORKER_ARGS
        print("worker options:", " ".join(WORKER_ARGS) or "(the defaults)")
        rate = args.peak or await peak(
            await create_database(cluster.url, "horizon_peak"), 30 if quick else 90
        )
        report["peak"] = rate
        print(f"\npeak: {rate:,.0f} jobs/s (one default worker process, a producer flooding it)")
        plans: dict[str, tuple[float, list[Phase]]] = {
            "W8": (0.7, [Phase("clean", clean_s), Phase("held (idle xid)", held_s, "idle"),
                         Phase("recovery", recovery_s)]),
            "clean60": (0.6, [Phase("clean", clean_s)]),
            "W11": (0.7, windows(soak_s, window_s)),
        }  # fmt: skip
        for name in wanted:
            if name not in plans:
                raise SystemExit(f"unknown workload {name} (W9, W9cpu: benchmarks.readers)")
            share, _ = plans[name]
            runs = []
            for i in range(args.runs):
                phases = [Phase(p.name, p.seconds, p.held) for p in plans[name][1]]
                url = await create_database(cluster.url, f"horizon_{name.lower()}_{i}")
                runs.append(await Workload(url, share * rate, phases).run())
                print(f"\n{name} run {i + 1}/{args.runs} at {share:.0%} of the peak:")
                print(table(runs[-1]), flush=True)
            report["workloads"][name] = runs
            if name == "W8":
                targets += horizon_targets(name, runs)
            elif name == "W11":
                targets += soak_targets(runs)
            elif name == "clean60":
                p99 = statistics.median(r[0]["pickup p99 ms"] or 0 for r in runs)
                targets.append(("clean at 60 % of the peak: pickup p99 <= 50 ms", f"{p99} ms",
                                verdict(p99 <= 50)))  # fmt: skip
    print("\n| target (median of runs) | measured | verdict |\n|---|---|---|")
    for target in targets:
        print("| " + " | ".join(target) + " |")
    report["targets"] = targets
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"horizon-{report['started']}.json"
    path.write_text(json.dumps(report, indent=1, default=str))
    print(f"\nraw: {path}")


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.horizon")
    p.add_argument("--workloads", default="W8,clean60,W11")
    p.add_argument(
        "--worker-args", default="", help="options for every worker, e.g. '--vacuum-interval 0'"
    )
    p.add_argument("--runs", type=int, default=1, help="runs per workload (targets: 3)")
    p.add_argument("--quick", action="store_true", help="20/60/20 s phases, a 5 min soak")
    p.add_argument("--peak", type=float, help="skip the peak's measurement: use this rate")
    return p.parse_args(argv)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--produce"]:
        url, rate, seconds = sys.argv[2:5]
        asyncio.run(produce(url, float(rate), float(seconds)))
    else:
        asyncio.run(main(parse(sys.argv[1:])))
