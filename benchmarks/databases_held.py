"""W8 over databases (issue 46): a held MVCC horizon in one database, the others' rates recorded.

A held horizon (a report, a ``pg_dump``, a session left idle in a transaction) keeps every
dead tuple its database's queue makes until it ends. With several databases, the other
databases' queues must not slow down. On one server the hold is not its database's alone:
vacuum counts only a database's own sessions, but their snapshots start at the oldest
transaction running anywhere on the server, so the others' busy sessions carry the held xid
(the horizon readout below shows it); their queues' hot paths are kept short by the
generations' truncation, which no horizon holds. This measures it on one server, the way
benchmarks/horizon.py measures W8 on one database:

- three fresh databases on the bench's server (``CREATE DATABASE``, dropped at the end), one
  App naming them all, each database's jobs routed there by its lane (benchmarks/databases.py);
- one ``skiplock worker benchmarks.databases:app --concurrency 20`` serving all three (the
  CLI at its defaults), warmed up (it has run a job in every database);
- a producer process offering a fixed rate of no-op jobs to each database (300 a second
  each by default), one loop per database, each credited on its own elapsed time (a slow
  round catches up in the next; a slow database does not hold the others' rate back);
- a sampler reading ``n_dead_tup`` of each database's skiplock tables every second;
- phases whose bounds are taken on the database clock (one server: one clock): clean, then
  held (one session on ``d0`` alone idle in a transaction that took an xid, ``BEGIN; SELECT
  txid_current();``, benchmarks/cluster.py's ``hold_horizon``), then recovery.

Afterwards (the backlog drained, the worker stopped) each database's phases are read back
from its table as horizon.py reads them: completions finished in the phase against the
offered rate, pickup latency ``attempted_at - run_at`` (claimed minus due, database clock)
p50/p99. A verdict line per other database sets its held phase against its clean phase: the
completion rate's ratio (target >= 0.95) and pickup p99's (target <= 2x, issue 24's W8 bound).

    .venv/bin/python -m benchmarks.databases_held                 # 60/120/30 s, 300 jobs/s each
    .venv/bin/python -m benchmarks.databases_held --quick         # 15/30/10 s: a smoke test
    .venv/bin/python -m benchmarks.databases_held --rate 1000 --held 300
    .venv/bin/python -m benchmarks.databases_held --servers 2    # d0 on a server of its own

With ``--servers 2`` the held database is on a server of its own (and d1, d2 on a second;
both stock clusters the bench makes, autovacuum on): the held xid is then in no snapshot of
d1's and d2's server, and what is left between them is the machine (its two cores).

It runs on the bench's shared server (``--url``; its autovacuum is off on the bench machine,
so what removes dead tuples is skiplock's own upkeep: its vacuum each second and its
generations' rotation, which the held database's snapshot holds back).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from .cluster import hold_horizon, stock_cluster
from .common import DEFAULT_PG_URL
from .databases import (
    ROOT,
    fresh_databases,
    lane_of,
    make_app,
    start_worker,
    stop_worker,
    warm_up,
)
from .horizon import PHASE_SQL

DATABASES = 3
TICK_S = 0.01
SAMPLE_S = 1.0
MAX_ROUND = 10_000
"""Jobs one producer round enqueues at most in one database."""
DEAD_SQL = """
SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE relname LIKE 'skiplock%'
"""
"""Dead tuples of each skiplock table of a database (the job table's partitions, the live
generations, the keys, the leases...), summed: a partitioned parent has none of its own."""
HELD_AGE = 1_000
"""A horizon more than this many transactions back counts as held: at this load a statement
in flight is tens of transactions old, the held session thousands after a few seconds."""
HORIZON_SQL = """
SELECT coalesce(max(greatest(age(backend_xid), age(backend_xmin))), 0)
FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
"""
"""How many transactions back the oldest xid or snapshot xmin among this database's sessions
is, which is how far back its vacuum's horizon is held: the held session's age in d0; in the
others, the age of the held xid too whenever one of their sessions is mid-statement (a
snapshot's xmin is the oldest transaction running on the whole server). The sampler's own
session is left out: its snapshot would show the held xid in every database."""


# -- the producer process -------------------------------------------------------------------------


async def produce(rate: float, seconds: float) -> None:
    """The producer process: ``rate`` no-op jobs a second into each database's lane until
    SIGTERM (``seconds`` at most), through the App (benchmarks.databases reads its URLs from
    the environment); prints how many it sent to each."""
    from benchmarks.databases import app, noop

    count = len(app.directory.names())
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    sent = [0] * count
    start = time.monotonic()
    print("READY", flush=True)  # the bench starts its first phase on this line

    async def one(i: int) -> None:
        routed = noop.using(lane=lane_of(i))
        while (elapsed := time.monotonic() - start) < seconds and not stopping.is_set():
            due = min(int(elapsed * rate) - sent[i], MAX_ROUND)  # a deficit is carried
            if due > 0:
                await app.enqueue_many(routed.prepare(0) for _ in range(due))
                sent[i] += due
            await asyncio.sleep(TICK_S)

    await asyncio.gather(*(one(i) for i in range(count)))
    await app.close()
    print(json.dumps({"sent": sent, "seconds": time.monotonic() - start}), flush=True)


# -- the phases -----------------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    seconds: float
    held: bool = False
    started: Any = None
    ended: Any = None
    dead_max: list[int] = field(default_factory=lambda: [0] * DATABASES)
    dead_end: list[int] = field(default_factory=lambda: [0] * DATABASES)
    """Each database's dead tuples: the most sampled in the phase, and the last sample."""
    horizon_max: list[int] = field(default_factory=lambda: [0] * DATABASES)
    held_samples: list[int] = field(default_factory=lambda: [0] * DATABASES)
    samples: int = 0
    """Each database's horizon age (transactions): the most sampled in the phase, and in how
    many of the phase's ``samples`` it was held (more than ``HELD_AGE`` back)."""
    tables_end: list[dict[str, int]] = field(default_factory=lambda: [{}] * DATABASES)
    """The last sample's dead tuples by table, each database's: where they are."""
    load: float = 0.0
    """The machine's 1-minute load average at the phase's end (the others' slowing down
    and the held database's alike, with the load up: the machine, not the horizon)."""


async def sample(urls: list[str], phase: list[Phase], stop: asyncio.Event) -> None:
    """Every second, each database's dead tuples into the current phase (``phase[0]``),
    through connections of its own (the phases' clock reads share none with it)."""
    conns = [await asyncpg.connect(url) for url in urls]
    try:
        while not stop.is_set():
            for i, conn in enumerate(conns):
                tables = {r["relname"]: int(r["n_dead_tup"]) for r in await conn.fetch(DEAD_SQL)}
                dead = sum(tables.values())
                phase[0].dead_max[i] = max(phase[0].dead_max[i], dead)
                phase[0].dead_end[i] = dead
                phase[0].tables_end[i] = tables
                age = int(await conn.fetchval(HORIZON_SQL))
                phase[0].horizon_max[i] = max(phase[0].horizon_max[i], age)
                phase[0].held_samples[i] += age > HELD_AGE
            phase[0].samples += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SAMPLE_S)
    finally:
        for conn in conns:
            await conn.close()


async def run(base: str | list[str], rate: float, phases: list[Phase]) -> dict[str, Any]:
    """One run: fresh databases, the worker, the producer, the phases; every database's
    phases read back from its table. Every job sent must have succeeded once."""
    async with fresh_databases(base, DATABASES, lanes=True) as fresh:
        worker = await start_worker(fresh.env)
        producer = None
        stop = asyncio.Event()
        sampler = None
        try:
            bench_app, _, warm_task = make_app(fresh.urls, lanes=True)
            try:
                await warm_up(fresh, warm_task)
            finally:
                await bench_app.close()
            cap = sum(p.seconds for p in phases) + 120  # SIGTERM ends it before
            producer = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "benchmarks.databases_held", "--produce", str(rate),
                str(cap), env=fresh.env, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            assert producer.stdout is not None
            ready = await asyncio.wait_for(producer.stdout.readline(), 60)
            if ready.strip() != b"READY":
                raise RuntimeError(f"the producer did not start: {ready!r}")
            clock = fresh.conns[0]
            current = [phases[0]]
            sampler = asyncio.create_task(sample(fresh.urls, current, stop))
            for phase in phases:
                current[0] = phase
                phase.started = await clock.fetchval("SELECT clock_timestamp()")
                if phase.held:  # d0 alone: one session idle in a transaction with an xid
                    await hold_horizon(fresh.urls[0], "idle", phase.seconds)
                else:
                    await asyncio.sleep(phase.seconds)
                phase.ended = await clock.fetchval("SELECT clock_timestamp()")
                phase.load = os.getloadavg()[0]
            producer.send_signal(signal.SIGTERM)
            out, _ = await producer.communicate()
            sent = json.loads(out.decode().strip().splitlines()[-1])["sent"]
            stop.set()
            await sampler
            # the backlog left at the producer's end runs before the worker stops
            pending = "SELECT count(*) FROM skiplock_jobs WHERE state IN ('pending', 'running')"
            deadline = time.monotonic() + 60
            while sum([await c.fetchval(pending) for c in fresh.conns]) and (
                time.monotonic() < deadline
            ):
                await asyncio.sleep(0.1)
        finally:  # the worker first: the databases are dropped on the way out
            stop.set()
            if producer is not None and producer.returncode is None:
                producer.kill()
                await producer.wait()
            await stop_worker(worker)
            if sampler is not None and not sampler.done():
                sampler.cancel()
        done_sql = (
            "SELECT count(*) FILTER (WHERE state = 'succeeded' AND attempt = 1),"
            " count(*) FROM skiplock_jobs WHERE task = 'noop'"
        )
        totals = [await c.fetchrow(done_sql) for c in fresh.conns]
        rows: list[list[dict[str, Any]]] = []
        for i, conn in enumerate(fresh.conns):
            rows.append([])
            for phase in phases:
                got = await conn.fetchrow(PHASE_SQL, phase.started, phase.ended)
                span = (phase.ended - phase.started).total_seconds()
                rows[i].append(
                    {
                        "completed/s": got["completed"] / span,
                        "p50": _ms(got["p50"]),
                        "p99": _ms(got["p99"]),
                        "seconds": span,
                        "dead max": phase.dead_max[i],
                        "dead end": phase.dead_end[i],
                    }
                )
    return {
        "sent": sent,
        "succeeded once": [t[0] for t in totals],
        "rows": [t[1] for t in totals],
        "phases": rows,
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


# -- the report -----------------------------------------------------------------------------------


def report(rate: float, phases: list[Phase], got: dict[str, Any], layout: str) -> None:
    print(
        f"\nW8 over databases: {DATABASES} databases, {layout}; one CLI worker at its "
        f"defaults serving all, {rate:,.0f} jobs/s offered to each; the horizon held on d0 "
        "in the held phase; pickup = attempted_at - run_at (database clock)"
    )
    print(
        "| database | phase | seconds | offered/s | completed/s | completed % | pickup p50 ms"
        " | pickup p99 ms | dead tuples max | dead tuples at the end | load at the end |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for i, per_phase in enumerate(got["phases"]):
        for phase, r in zip(phases, per_phase, strict=True):
            name = f"d{i}" + (" (held)" if i == 0 else "")
            print(
                f"| {name} | {phase.name} | {r['seconds']:.1f} | {rate:,.0f} | "
                f"{r['completed/s']:,.0f} | {100 * r['completed/s'] / rate:.1f} | "
                f"{_fmt(r['p50'])} | {_fmt(r['p99'])} | {r['dead max']:,} | {r['dead end']:,} | "
                f"{phase.load:.1f} |"
            )
    print("\n| database | jobs sent | succeeded, first attempt | rows |\n|---|---|---|---|")
    for i in range(DATABASES):
        print(f"| d{i} | {got['sent'][i]:,} | {got['succeeded once'][i]:,} | {got['rows'][i]:,} |")
    held = next(j for j, p in enumerate(phases) if p.held)
    print(
        f"\nthe held phase: in how many samples each database's horizon was held (over "
        f"{HELD_AGE:,} transactions back, its sessions' oldest xid or snapshot xmin), how far "
        "at most, and where its dead tuples were at the last sample (the three tables with most):"
    )
    during = phases[held]
    for i, tables in enumerate(during.tables_end):
        top = sorted(tables.items(), key=lambda kv: -kv[1])[:3]
        print(
            f"  d{i}: held in {during.held_samples[i]} of {during.samples} samples, at most "
            f"{during.horizon_max[i]:,} transactions back (clean phase: "
            f"{phases[0].held_samples[i]} of {phases[0].samples}); "
            + ", ".join(f"{name} {dead:,}" for name, dead in top)
        )
    print()
    for i, per_phase in enumerate(got["phases"]):
        clean, during = per_phase[0], per_phase[held]
        rate_ratio = during["completed/s"] / clean["completed/s"] if clean["completed/s"] else 0
        p99_ratio = (during["p99"] or 0) / max(clean["p99"] or 1e-9, 1e-9)
        if i == 0:
            print(
                f"d0 (the held one): held/clean completions {rate_ratio:.2f}, pickup p99 "
                f"{p99_ratio:.2f}x; dead tuples {per_phase[0]['dead end']:,} at the clean "
                f"phase's end, {during['dead end']:,} at the held phase's"
            )
            continue
        ok = rate_ratio >= 0.95 and p99_ratio <= 2
        print(
            f"d{i}: held/clean completions {rate_ratio:.2f} (target >= 0.95), pickup p99 "
            f"{_fmt(during['p99'])} against {_fmt(clean['p99'])} ms: {p99_ratio:.2f}x "
            f"(target <= 2x); dead tuples at the held phase's end {during['dead end']:,}: "
            + ("not slowed down (met)" if ok else "SLOWED DOWN (NOT met)")
        )
    complete = got["sent"] == got["succeeded once"] == got["rows"]
    print("every job sent succeeded on its first attempt: " + ("yes" if complete else "NO"))
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


def _fmt(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.1f}"


async def main(args: argparse.Namespace) -> None:
    phases = [
        Phase("clean", args.clean),
        Phase("held (idle xid on d0)", args.held, held=True),
        Phase("recovery", args.recovery),
    ]
    if args.servers == 1:
        got = await run(args.url, args.rate, phases)
        report(args.rate, phases, got, "all on one server (--url)")
        return
    # d0 alone on a server of its own, d1 and d2 on another: both stock clusters the bench
    # makes (benchmarks/cluster.py), one machine (one clock for the phases' bounds)
    with (
        stock_cluster(f"skiplock_bench_{os.getpid()}_a") as own,
        stock_cluster(f"skiplock_bench_{os.getpid()}_b") as shared,
    ):
        got = await run([own.url, shared.url, shared.url], args.rate, phases)
    report(
        args.rate, phases, got,
        "d0 on a server of its own, d1 and d2 on a second (two stock clusters, one machine)",
    )  # fmt: skip


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.databases_held")
    p.add_argument("--url", default=os.environ.get("SKIPLOCK_BENCH_PG", DEFAULT_PG_URL))
    p.add_argument("--rate", type=float, default=300.0, help="jobs/s offered to each database")
    p.add_argument("--clean", type=float, help="the clean phase, seconds (60; --quick 15)")
    p.add_argument("--held", type=float, help="the held phase, seconds (120; --quick 30)")
    p.add_argument("--recovery", type=float, help="the recovery, seconds (30; --quick 10)")
    p.add_argument("--quick", action="store_true", help="a smoke test: 15/30/10 s phases")
    p.add_argument(
        "--servers", type=int, choices=(1, 2), default=1,
        help="1: every database on --url's server; 2: d0 (the held one) on a stock cluster of "
        "its own and d1, d2 on a second one, both made and dropped by the bench (needs root)",
    )  # fmt: skip
    args = p.parse_args(argv)
    args.clean = args.clean or (15.0 if args.quick else 60.0)
    args.held = args.held or (30.0 if args.quick else 120.0)
    args.recovery = args.recovery or (10.0 if args.quick else 30.0)
    return args


if __name__ == "__main__":
    if sys.argv[1:2] == ["--produce"]:
        asyncio.run(produce(float(sys.argv[2]), float(sys.argv[3])))
    else:
        asyncio.run(main(parse(sys.argv[1:])))
