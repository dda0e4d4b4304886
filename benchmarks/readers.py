"""Readers that must never stall the queue (issue 44): W9 as the public harness runs it, its CPU
control W9cpu, W19 ``pg_dump``, the catalogs' churn, and W9sqlite, SQLite's WAL under a held
read transaction.

PostgreSQL workloads run through skiplock itself on a cluster of the bench's own with stock
settings (benchmarks/cluster.py: autovacuum on), each on a fresh database: a **producer**
process enqueueing no-op jobs at a fixed rate (``benchmarks.horizon --produce``), one **worker**
process at the defaults (``skiplock worker benchmarks.skiplock_app:app --log-level warning``,
its log kept in ``benchmarks/results/``), and three phases, their boundaries taken on the
database clock:

- **clean**, nothing else running;
- the **held** phase:
  - W9: 4 sessions that each open ONE ``REPEATABLE READ`` transaction at the phase's start and
    keep it for the whole phase, reading ``skiplock_jobs`` in a loop inside it (the counts by
    state and the page of the 50 newest jobs, 100 ms apart: benchmarks/cluster.py
    ``active_readers``), as the harness's "active readers" scenario does;
  - W9cpu: W9's control, 4 processes spinning on the CPU, touching no database, so what the
    readers' CPU costs the queue on this machine's cores is told apart from what their
    snapshots and locks cost the storage;
  - W9twin: W9's second control, run after W9 at the same rate: 4 PostgreSQL sessions that
    replay, round by round, the CPU each W9 reader's backend used, burning it in statements that
    read no skiplock table and hold no snapshot between them (benchmarks/cpu_twin.py). The
    readers' CPU in the readers' shape, without their snapshots, locks or scans;
  - W9done: W9's readers reading the history alone (``skiplock_jobs_done``, as
    docs/operations/readers.md tells reports to): snapshots held as long, no live table read;
  - W19: ``pg_dump`` of the whole database to /dev/null, its output read slowly (paced by a
    reader in this process) so the dump lasts the whole phase: one ``REPEATABLE READ``
    transaction and ``ACCESS SHARE`` on every table, the live segments included, for its run;
- **recovery**, the holders gone.

W9 and W9cpu run at a fixed 1,000 jobs/s and at 60 % of the peak measured first in the same
run (one default worker while a producer floods it, as ``benchmarks.horizon`` measures it);
W19 at 1,000 jobs/s.

**Sampled every second**: the dead tuples (``n_dead_tup``) of every table under
``skiplock_jobs_live``, found anew at each sample by walking ``pg_inherits`` down from it
(the rotation may attach and detach tables as it goes, so no name is assumed), summed apart for
the tables **attached**, those **detach-pending** (``pg_inherits.inhdetachpending``, a
``DETACH ... CONCURRENTLY`` under way) and those **detached**: seen under the live partition
before, no longer under it, not yet dropped.

**Catalog churn**: ``pg_total_relation_size`` and ``pg_stat_sys_tables.n_dead_tup`` of
``pg_class``, ``pg_attribute`` and the other catalogs a partition's attach or detach writes,
at the start (after ``migrate``) and at the end of every phase.

**Per phase**, read back from the table after the worker stopped: completions (rows finished in
the phase) against the offered rate, the claim's latency (``attempted_at - run_at``: claimed
minus due, both by the database clock) p50/p99 and p99 over the clean phase's, and the most
dead tuples at any sample; CPU seconds of the worker, the server and the whole machine; and for
recovery, the seconds until the per-second claim p99 stayed under twice the clean phase's.
Issue 44's targets are printed per run: completions >= 95 % of offered, claim p99 <= 2x the
clean phase's, dead tuples in the attached live tables <= 50,000 at every sample.

**W9sqlite**: a file in a temporary directory, a producer and a worker at a fixed 1,000 jobs/s,
and in the held phase one process holding a read transaction (``BEGIN``, then the same two
reads once a second) for the whole phase, which stops checkpoints from going past its snapshot.
The WAL file's size sampled every second; per phase completions against offered and claim
p50/p99; and after the reader ends, the WAL's largest and final sizes and the seconds until it
was back under twice the clean phase's largest.

    .venv/bin/python -m benchmarks.readers                         # 60/180/60 s phases
    .venv/bin/python -m benchmarks.readers --phase-seconds 20      # short mode: 20 s each
    .venv/bin/python -m benchmarks.readers --workloads W9 --peak 9000

Needs root for the PostgreSQL workloads (pg_createcluster). Results in
benchmarks/results/readers-*.json (every sample included).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from . import horizon
from .cluster import (
    HISTORY_READER_SQL,
    READER_PAUSE_S,
    active_readers,
    burn_cpu,
    create_database,
    settings,
    stock_cluster,
)
from .common import machine_busy_seconds
from .cpu_twin import proc_stat, twin_readers

RESULTS = Path(__file__).resolve().parent / "results"
FIXED_RATE = 1_000.0
"""Issue 44's offered rate: the harness's long-horizon runs offer 1,000 jobs/s."""
PEAK_SHARE = 0.6
FULL_PHASES = (60.0, 180.0, 60.0)
"""Clean, held, recovery at full length: the held phase is the issue's three minutes."""
SAMPLE_S = 1.0
COMPLETED_BOUND = 95.0
P99_BOUND = 2.0
DEAD_BOUND = 50_000
CATALOGS = (
    "pg_class",
    "pg_attribute",
    "pg_type",
    "pg_depend",
    "pg_inherits",
    "pg_index",
    "pg_constraint",
)
"""The catalogs a table's create, attach, detach and drop write rows into."""
DUMP_MIN_BYTES_S = 16 * 1024
DUMP_LEAST_S = 120.0
"""Issue 44: the dump runs at least 2 minutes (at full length; 2/3 of a shorter phase)."""
SQLITE_READER_PAUSE_S = 1.0
WARMUP_S = 10.0
"""Before the clean phase, unmeasured: the worker's start-up and first claims (half a phase in
short mode, when that is less)."""
PRODUCER_S = 24 * 3600.0
"""The producer's own limit: it is stopped by SIGTERM after the last phase."""
WORKER_ARGS: list[str] = []


# -- CPU, read from /proc (no psutil needed) -----------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


_stat = proc_stat


def process_cpu(pid: int | None, reaped: bool = True) -> float:
    """User+system CPU seconds of ``pid`` (and of its children it has reaped); 0 once gone."""
    if not pid:
        return 0.0
    try:
        f = _stat(pid)
    except (OSError, ValueError):
        return 0.0
    ticks = int(f[11]) + int(f[12]) + ((int(f[13]) + int(f[14])) if reaped else 0)
    return ticks / _TICK


def server_cpu(postmaster: int | None) -> float:
    """The PostgreSQL server's CPU seconds so far: the postmaster with the backends it reaped,
    and every backend alive now."""
    if not postmaster:
        return 0.0
    total = process_cpu(postmaster)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            f = _stat(int(entry))
        except (OSError, ValueError):
            continue
        if int(f[1]) == postmaster:
            total += (int(f[11]) + int(f[12])) / _TICK
    return total


def parent_of(pid: int) -> int | None:
    try:
        return int(_stat(pid)[1])
    except (OSError, ValueError):
        return None


# -- the processes -------------------------------------------------------------------------------


def _env(url: str) -> dict[str, str]:
    return horizon._env(url)


async def start_worker(url: str, log: Path) -> asyncio.subprocess.Process:
    """One worker process at the defaults, its log (warnings and above) into ``log``."""
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "skiplock", "worker", "benchmarks.skiplock_app:app",
            "--log-level", "warning", *WORKER_ARGS,
            env=_env(url), cwd=horizon.ROOT, stdout=out, stderr=out,
        )  # fmt: skip


def log_summary(log: Path) -> dict[str, Any]:
    """What the worker said: its lines counted, and the distinct ones (first 200 characters)."""
    if not log.exists():
        return {"lines": 0, "distinct": []}
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    distinct: dict[str, int] = {}
    for line in lines:
        # a log line's time and numbers vary; the text after the level names the event
        key = line[line.find(" ", 30) + 1 :][:200] if len(line) > 30 else line
        distinct[key] = distinct.get(key, 0) + 1
    return {
        "lines": len(lines),
        "distinct": [{"count": n, "line": k} for k, n in list(distinct.items())[:12]],
    }


async def stop_producer(producer: asyncio.subprocess.Process) -> dict[str, Any]:
    """SIGTERM to the producer (it runs until told, so a phase that overran, like a dump that
    took longer than its phase, never leaves the recovery without its offered load); what it
    sent and for how long."""
    producer.send_signal(signal.SIGTERM)
    out, _ = await producer.communicate()
    got: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return got


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 60)
        except TimeoutError:
            proc.kill()
            await proc.wait()


# -- W19: pg_dump, read slowly -------------------------------------------------------------------


async def slow_dump(url: str, seconds: float, pg_dump: str) -> dict[str, Any]:
    """``pg_dump`` of the database at ``url`` to nowhere, its output read at a pace meant to
    make it last ``seconds``: half the bytes its tables hold now (a plain dump's text is
    smaller than the heap, so it would finish later) spread over ``seconds``; past
    ``seconds``, whatever is left is read at full speed. Returns how long it ran, what it wrote,
    and its exit."""
    conn = await asyncpg.connect(url)
    try:
        heap = await conn.fetchval(
            "SELECT coalesce(sum(pg_table_size(relid)), 0)::bigint FROM pg_stat_user_tables"
        )
    finally:
        await conn.close()
    pace = max(DUMP_MIN_BYTES_S, heap / 2 / seconds)
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        pg_dump, "--dbname", url, "--no-owner",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    read = 0
    while chunk := await proc.stdout.read(8192):
        read += len(chunk)
        elapsed = time.monotonic() - started
        if elapsed < seconds and read > pace * elapsed:
            await asyncio.sleep(min(read / pace - elapsed, seconds - elapsed))
    err = (await proc.stderr.read()).decode(errors="replace").strip()
    code = await proc.wait()
    return {
        "dump_s": round(time.monotonic() - started, 1),
        "dump_bytes": read,
        "paced_bytes_s": round(pace),
        "heap_bytes_at_start": heap,
        "exit": code,
        "stderr": err[-500:],
    }


# -- one PostgreSQL run --------------------------------------------------------------------------


LIVE_SQL = """
WITH RECURSIVE tree(relid, pending) AS (
    SELECT c.oid, false FROM pg_class c
    WHERE c.oid = to_regclass('skiplock_jobs_live')
  UNION ALL
    SELECT i.inhrelid, t.pending OR i.inhdetachpending
    FROM pg_inherits i JOIN tree t ON i.inhparent = t.relid
)
SELECT c.oid, c.relname,
       CASE WHEN t.relid IS NULL THEN 'detached'
            WHEN t.pending THEN 'pending' ELSE 'attached' END AS place,
       coalesce(s.n_dead_tup, 0) AS dead
FROM pg_class c
LEFT JOIN tree t ON t.relid = c.oid
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.relkind = 'r' AND (t.relid IS NOT NULL OR c.oid = ANY($1::oid[]))
"""
"""Every table under ``skiplock_jobs_live`` now (a recursive walk of ``pg_inherits``;
``inhdetachpending`` anywhere on the way marks it detach-pending), and every table seen under
it at an earlier sample that still exists (detached, not yet dropped). Reads catalogs and
statistics only: it takes no lock on the tables."""

CATALOG_SQL = """
SELECT c.relname, pg_total_relation_size(c.oid) AS bytes, s.n_live_tup AS live,
       s.n_dead_tup AS dead
FROM pg_class c JOIN pg_stat_sys_tables s ON s.relid = c.oid
WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relname = ANY($1::text[])
"""
RELATIONS_SQL = "SELECT count(*) FROM pg_class WHERE relname LIKE 'skiplock%'"

SECONDS_SQL = """
SELECT floor(extract(epoch FROM attempted_at - $1))::int AS second, count(*) AS claims,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM attempted_at - run_at))
           AS p99
FROM skiplock_jobs WHERE attempted_at >= $1 AND attempted_at < $2
GROUP BY 1 ORDER BY 1
"""
"""The claims of each second of a phase and their latency p99: the held phase's trend and the
recovery's time come from it."""


@dataclass
class Phase:
    name: str
    seconds: float
    held: str | None = None
    """"readers" (W9), "cpu" (W9cpu), "twin" (W9twin), "history readers" (W9done), "dump"
    (W19) or None."""
    traces: list[Any] = field(default_factory=list)
    """W9twin: the CPU traces of the W9 readers it replays (benchmarks/cpu_twin.py)."""
    started: Any = None
    ended: Any = None
    samples: list[dict[str, Any]] = field(default_factory=list)
    catalogs: dict[str, Any] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    holder: Any = None
    t: float = 0.0
    """When it began, on the samples' clock (seconds from the run's start)."""
    statements: list[dict[str, Any]] = field(default_factory=list)
    """``--statements``: the phase's costliest statements, from pg_stat_statements."""


STATEMENTS_SQL = """
SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query, calls,
       round(total_exec_time::numeric, 1) AS exec_ms,
       round((total_exec_time / greatest(calls, 1))::numeric, 3) AS mean_exec_ms,
       round(max_exec_time::numeric, 1) AS max_exec_ms,
       round((total_plan_time / greatest(plans, 1))::numeric, 3) AS mean_plan_ms,
       plans, shared_blks_hit + shared_blks_read AS blocks, wal_records
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY total_exec_time + total_plan_time DESC LIMIT 14
"""
"""``--statements``: the statements that took the most server time in a phase (a probe)."""


async def catalogs(conn: asyncpg.Connection) -> dict[str, Any]:
    rows = await conn.fetch(CATALOG_SQL, list(CATALOGS))
    out: dict[str, Any] = {r["relname"]: {k: r[k] for k in ("bytes", "live", "dead")} for r in rows}
    out["skiplock relations"] = await conn.fetchval(RELATIONS_SQL)
    return out


class Run:
    """One workload: a fresh database, ``rate`` jobs a second, its phases in turn."""

    def __init__(
        self,
        url: str,
        rate: float,
        phases: list[Phase],
        log: Path,
        pg_dump: str,
        statements: bool = False,
    ) -> None:
        self.url, self.rate, self.phases, self.log, self.pg_dump = url, rate, phases, log, pg_dump
        self.statements = statements
        self.current = phases[0]
        self.warmup = min(WARMUP_S, phases[0].seconds / 2)
        self.t0 = time.monotonic()
        self.stop = asyncio.Event()
        self.seen: dict[int, str] = {}

    async def sample(self) -> None:
        conn = await asyncpg.connect(self.url)
        t0 = self.t0
        try:
            while not self.stop.is_set():
                rows = await conn.fetch(LIVE_SQL, list(self.seen))
                got: dict[str, Any] = {"t": round(time.monotonic() - t0, 1)}
                for place in ("attached", "pending", "detached"):
                    mine = [r for r in rows if r["place"] == place]
                    got[place] = sum(int(r["dead"]) for r in mine)
                    got[f"{place} tables"] = len(mine)
                for r in rows:
                    self.seen.setdefault(int(r["oid"]), r["relname"])
                self.current.samples.append(got)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), SAMPLE_S)
        finally:
            await conn.close()

    async def hold(self, phase: Phase) -> Any:
        if phase.held == "readers":
            return await active_readers(self.url, phase.seconds)
        if phase.held == "history readers":
            return await active_readers(self.url, phase.seconds, queries=HISTORY_READER_SQL)

        if phase.held == "cpu":
            await burn_cpu(phase.seconds)
            return None
        if phase.held == "twin":
            return await twin_readers(self.url, phase.seconds, phase.traces, READER_PAUSE_S)
        if phase.held == "dump":
            begun = time.monotonic()
            got = await slow_dump(self.url, phase.seconds, self.pg_dump)
            await asyncio.sleep(max(0.0, phase.seconds - (time.monotonic() - begun)))
            return got
        await asyncio.sleep(phase.seconds)
        return None

    async def run(self) -> dict[str, Any]:
        await horizon.migrate(self.url)
        conn = await asyncpg.connect(self.url)
        if self.statements:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        postmaster = parent_of(await conn.fetchval("SELECT pg_backend_pid()"))
        start_catalogs = await catalogs(conn)
        worker = await start_worker(self.url, self.log)
        producer = await horizon.start_producer(self.url, self.rate, PRODUCER_S)
        self.current = Phase("warm-up", self.warmup)
        self.t0 = time.monotonic()
        sampler = asyncio.create_task(self.sample())
        await asyncio.sleep(self.warmup)

        def cpu() -> dict[str, float]:
            return {
                "worker": process_cpu(worker.pid),
                "producer": process_cpu(producer.pid),
                "server": server_cpu(postmaster),
                "machine": machine_busy_seconds(),
            }

        try:
            for phase in self.phases:
                self.current = phase
                phase.t = round(time.monotonic() - self.t0, 1)
                before = cpu()
                if self.statements:
                    await conn.execute("SELECT pg_stat_statements_reset()")
                phase.started = await conn.fetchval("SELECT clock_timestamp()")
                phase.holder = await self.hold(phase)
                phase.ended = await conn.fetchval("SELECT clock_timestamp()")
                if self.statements:
                    phase.statements = [dict(r) for r in await conn.fetch(STATEMENTS_SQL)]
                after = cpu()
                phase.cpu = {k: round(after[k] - before[k], 1) for k in before}
                phase.catalogs = await catalogs(conn)
            produced = await stop_producer(producer)
        finally:
            self.stop.set()
            await sampler
            await stop(worker)
            if producer.returncode is None:
                producer.kill()
                await producer.wait()
        try:
            rows = []
            for phase in self.phases:
                got = await conn.fetchrow(horizon.PHASE_SQL, phase.started, phase.ended)
                assert got is not None
                seconds = await conn.fetch(SECONDS_SQL, phase.started, phase.ended)
                rows.append(self.row(phase, got, [dict(r) for r in seconds]))
        finally:
            await conn.close()
        clean_p99 = rows[0]["claim p99 ms"] or 0
        for row in rows:
            p99 = row["claim p99 ms"]
            row["p99 / clean"] = round(p99 / clean_p99, 2) if p99 and clean_p99 else None
        last = rows[-1]
        if len(self.phases) == 3 and clean_p99:  # recovery: when did the p99 come back?
            over = [
                s["second"]
                for s in last["per second"]
                if (s["p99"] or 0) * 1000 > P99_BOUND * clean_p99
            ]
            last["recovered after s"] = (max(over) + 1) if over else 0
            # and the dead tuples: the first sample back under the clean phase's largest
            clean_max, end = rows[0]["dead max attached"], self.phases[2]
            back = next((x["t"] for x in end.samples if x["attached"] <= clean_max), None)
            last["dead back after s"] = round(back - end.t, 1) if back is not None else "never"
        return {
            "rate": self.rate,
            "sent": produced["sent"],
            "expected": round(self.rate * produced["seconds"]),
            "phases": rows,
            "catalogs at start": start_catalogs,
            "worker log": log_summary(self.log) | {"path": str(self.log)},
        }

    def row(
        self, phase: Phase, got: asyncpg.Record, seconds: list[dict[str, Any]]
    ) -> dict[str, Any]:
        span = (phase.ended - phase.started).total_seconds()
        samples = phase.samples
        peak = {
            p: max((s[p] for s in samples), default=0) for p in ("attached", "pending", "detached")
        }
        tables = {
            p: max((s[f"{p} tables"] for s in samples), default=0)
            for p in ("attached", "pending", "detached")
        }
        return {
            "phase": phase.name,
            "seconds": round(span, 1),
            "offered/s": round(self.rate),
            "completed/s": round(got["completed"] / span),
            "completed %": round(100 * got["completed"] / span / self.rate, 1),
            "claim p50 ms": horizon._ms(got["p50"]),
            "claim p99 ms": horizon._ms(got["p99"]),
            "dead max attached": peak["attached"],
            "dead max detach-pending": peak["pending"],
            "dead max detached": peak["detached"],
            "tables max attached/pending/detached": "/".join(str(tables[p]) for p in tables),
            "attached tables max": tables["attached"],
            "samples": len(samples),
            "cpu s": phase.cpu,
            "catalogs at end": phase.catalogs,
            "holder": phase.holder,
            "statements": phase.statements,
            "per second": [
                {k: (float(v) if k == "p99" else v) for k, v in s.items()} for s in seconds
            ],
            "dead samples": samples,
        }


# -- W9sqlite: a read transaction on the WAL -----------------------------------------------------


def file_bytes(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def sqlite_reader(path: str, seconds: float) -> None:
    """The reader process: ONE read transaction on the file for ``seconds``, reading the counts
    by state and the newest jobs once a second inside it."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=60)
    end = time.monotonic() + seconds
    rounds = 0
    conn.execute("BEGIN")
    while time.monotonic() < end:
        conn.execute("SELECT state, count(*) FROM skiplock_jobs GROUP BY state").fetchall()
        conn.execute(
            "SELECT id, queue, task, state FROM skiplock_jobs ORDER BY id DESC LIMIT 50"
        ).fetchall()
        rounds += 1
        time.sleep(min(SQLITE_READER_PAUSE_S, max(0.0, end - time.monotonic())))
    conn.execute("COMMIT")
    conn.close()
    print(json.dumps({"rounds": rounds, "seconds": seconds}), flush=True)


def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return round((ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)) * 1000, 1)


async def sqlite_wal(rate: float, lengths: tuple[float, float, float], log: Path) -> dict[str, Any]:
    names = ("clean", "reader (1 read tx)", "recovery")
    with tempfile.TemporaryDirectory(prefix="skiplock-wal-") as tmp:
        path = os.path.join(tmp, "bench.db")
        wal = path + "-wal"
        url = f"sqlite:///{path}"
        await horizon.migrate(url)
        worker = await start_worker(url, log)
        producer = await horizon.start_producer(url, rate, PRODUCER_S)
        samples: list[list[dict[str, Any]]] = [[], [], []]
        current = 0
        done = asyncio.Event()
        t0 = time.monotonic()

        async def sample() -> None:
            while not done.is_set():
                size = file_bytes(wal)
                samples[current].append({"t": round(time.monotonic() - t0, 1), "wal": size})
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), SAMPLE_S)

        sampler = asyncio.create_task(sample())
        await asyncio.sleep(min(WARMUP_S, lengths[0] / 2))
        samples[0].clear()
        bounds: list[tuple[float, float]] = []
        cpu: list[dict[str, float]] = []
        reader_out: dict[str, Any] = {}
        try:
            for i, seconds in enumerate(lengths):
                current = i
                c0 = (process_cpu(worker.pid), machine_busy_seconds())
                started = time.time()
                if i == 1:
                    proc = await asyncio.create_subprocess_exec(
                        sys.executable, "-m", "benchmarks.readers", "--sqlite-reader", path,
                        str(seconds), env=_env(url), cwd=horizon.ROOT,
                        stdout=asyncio.subprocess.PIPE,
                    )  # fmt: skip
                    out, _ = await proc.communicate()
                    reader_out = json.loads(out.decode().strip().splitlines()[-1])
                    reader_out["exit"] = proc.returncode
                else:
                    await asyncio.sleep(seconds)
                bounds.append((started, time.time()))
                c1 = (process_cpu(worker.pid), machine_busy_seconds())
                cpu.append({"worker": round(c1[0] - c0[0], 1), "machine": round(c1[1] - c0[1], 1)})
            produced = await stop_producer(producer)
        finally:
            done.set()
            await sampler
            await stop(worker)
            if producer.returncode is None:
                producer.kill()
                await producer.wait()
        conn = sqlite3.connect(path)
        rows = []
        try:
            for i, (a, b) in enumerate(bounds):
                completed = conn.execute(
                    "SELECT count(*) FROM skiplock_jobs WHERE finished_at >= ? AND finished_at < ?",
                    (a, b),
                ).fetchone()[0]
                waits = [
                    r[0]
                    for r in conn.execute(
                        "SELECT attempted_at - run_at FROM skiplock_jobs"
                        " WHERE attempted_at >= ? AND attempted_at < ?",
                        (a, b),
                    )
                ]
                span = b - a
                sizes = [s["wal"] for s in samples[i]]
                rows.append({
                    "phase": names[i],
                    "seconds": round(span, 1),
                    "offered/s": round(rate),
                    "completed/s": round(completed / span),
                    "completed %": round(100 * completed / span / rate, 1),
                    "claim p50 ms": _pct(waits, 50),
                    "claim p99 ms": _pct(waits, 99),
                    "WAL max MB": round(max(sizes, default=0) / 2**20, 1),
                    "WAL end MB": round((sizes[-1] if sizes else 0) / 2**20, 1),
                    "cpu s": cpu[i],
                })  # fmt: skip
        finally:
            conn.close()
    clean_max = max((s["wal"] for s in samples[0]), default=0)
    back_at = 2 * clean_max
    after = samples[2]
    back = next((s["t"] for s in after if s["wal"] <= back_at), None)
    held_end = after[0]["t"] if after else None
    clean_p99 = rows[0]["claim p99 ms"] or 0
    for row in rows:
        p99 = row["claim p99 ms"]
        row["p99 / clean"] = round(p99 / clean_p99, 2) if p99 and clean_p99 else None
    return {
        "rate": rate,
        "sent": produced["sent"],
        "expected": round(rate * produced["seconds"]),
        "phases": rows,
        "reader": reader_out,
        "WAL max bytes": max((s["wal"] for ph in samples for s in ph), default=0),
        "WAL final bytes": after[-1]["wal"] if after else None,
        "WAL clean max bytes": clean_max,
        "WAL back under 2x clean after s": (
            round(back - held_end, 1) if back is not None and held_end is not None else "never"
        ),
        "samples": samples,
        "worker log": log_summary(log) | {"path": str(log)},
    }


# -- the report ----------------------------------------------------------------------------------

SHOWN = (
    "phase", "seconds", "offered/s", "completed/s", "completed %", "claim p50 ms",
    "claim p99 ms", "p99 / clean", "dead max attached", "dead max detach-pending",
    "dead max detached", "tables max attached/pending/detached",
)  # fmt: skip
SHOWN_SQLITE = (
    "phase", "seconds", "offered/s", "completed/s", "completed %", "claim p50 ms",
    "claim p99 ms", "p99 / clean", "WAL max MB", "WAL end MB",
)  # fmt: skip


def statement_table(rows: list[dict[str, Any]]) -> str:
    """``--statements``: one phase's rows of STATEMENTS_SQL as a markdown table."""
    if not rows:
        return "  none"
    head = list(rows[0])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(r[k]).replace("|", "/") for k in head) + " |" for r in rows]
    return "\n".join(out)


def table(rows: list[dict[str, Any]], keys: tuple[str, ...], cpu: bool = True) -> str:
    head = list(keys) + (["CPU s worker / server / machine"] if cpu else ["CPU s worker / machine"])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        c = r["cpu s"]
        cells = [str(r.get(k)) for k in keys]
        cells.append(
            " / ".join(
                str(c.get(k))
                for k in (("worker", "server", "machine") if cpu else ("worker", "machine"))
            )
        )
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def targets(name: str, run: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Issue 44's three targets on the held and the recovery phase of one run."""
    out = []
    for row in run["phases"][1:]:
        label = f"{name} {row['phase']}"
        ratio = row.get("p99 / clean")
        out += [
            (f"{label}: completions >= {COMPLETED_BOUND:.0f} % of offered",
             f"{row['completed %']} %", verdict(row["completed %"] >= COMPLETED_BOUND)),
            (f"{label}: claim p99 <= {P99_BOUND:.0f}x the clean phase's",
             f"{ratio}x ({row['claim p99 ms']} ms)",
             verdict(ratio is not None and ratio <= P99_BOUND)),
        ]  # fmt: skip
        if "dead max attached" in row:
            found = row["attached tables max"] > 0  # none found: the walk missed the storage
            out.append((f"{label}: dead tuples in the attached live tables <= {DEAD_BOUND:,}",
                        f"{row['dead max attached']:,}" if found else "no live table found",
                        verdict(found and row["dead max attached"] <= DEAD_BOUND)))  # fmt: skip
        dump = row.get("holder")
        if isinstance(dump, dict) and "dump_s" in dump:
            least = min(DUMP_LEAST_S, 2 / 3 * row["seconds"])
            out.append((f"{label}: the dump ran >= {least:.0f} s and exited 0",
                        f"{dump['dump_s']} s, exit {dump['exit']}",
                        verdict(dump["dump_s"] >= least and dump["exit"] == 0)))  # fmt: skip
    return out


def trend(row: dict[str, Any]) -> str:
    """The held phase at its start, quarters and end: dead tuples attached and claim p99."""
    samples, seconds = row["dead samples"], row["per second"]

    def at(items: list[Any], q: float) -> Any:
        return items[min(len(items) - 1, round(q * (len(items) - 1)))] if items else None

    parts = []
    for q in (0, 0.25, 0.5, 0.75, 1):
        s, c = at(samples, q), at(seconds, q)
        dead = f"{s['attached']:,}" if s else "-"
        p99 = f"{c['p99'] * 1000:.0f} ms" if c and c["p99"] is not None else "-"
        parts.append(f"{q:.0%}: {dead} dead, p99 {p99}")
    return "; ".join(parts)


def catalog_line(run: dict[str, Any]) -> str:
    ends = ("clean end", "held end", "recovery end")
    points = [("start", run["catalogs at start"])] + [
        (label, r["catalogs at end"]) for label, r in zip(ends, run["phases"], strict=False)
    ]
    out = []
    for name in ("pg_class", "pg_attribute"):
        cells = ", ".join(
            f"{label} {c[name]['bytes'] / 2**10:,.0f} kB / {c[name]['dead']:,} dead"
            for label, c in points
        )
        out.append(f"  {name}: {cells}")
    cells = ", ".join(f"{label} {c['skiplock relations']}" for label, c in points)
    out.append(f"  relations named skiplock*: {cells}")
    return "\n".join(out)


def phases_for(held: str, label: str, lengths: tuple[float, float, float]) -> list[Phase]:
    return [
        Phase("clean", lengths[0]),
        Phase(label, lengths[1], held),
        Phase("recovery", lengths[2]),
    ]


def print_holder(held_row: dict[str, Any]) -> None:
    """What held the held phase, as it reported (the readers' CPU traces are in the json only),
    and the scale W9twin replays them at."""
    if held_row["holder"] is not None:
        shown = held_row["holder"]
        if isinstance(shown, list):
            shown = [{k: v for k, v in h.items() if k != "cpu_trace"} for h in shown]
        print(f"holder: {json.dumps(shown)}")
    if "twin scale" in held_row:
        print(f"W9twin replays these readers' CPU x {held_row['twin scale']}: the held phase's"
              " server CPU beyond the clean phase's rate")  # fmt: skip


def twin_traces(run: dict[str, Any]) -> list[Any]:
    """What W9twin replays of a W9 run: each reader's CPU trace, scaled so that together they
    burn all the server CPU the held phase took beyond the clean phase's rate. A reader's own
    backend is only part of it: its scans run in parallel workers too (other processes, their
    CPU reaped by the postmaster), and the queue's own statements, vacuum and the rotation
    may cost more under it. So the twin matches the readers' whole cost to the server, which
    leaves to the storage only what the CPU cannot explain."""
    clean, held = run["phases"][0], run["phases"][1]
    extra = held["cpu s"]["server"] - clean["cpu s"]["server"] * held["seconds"] / clean["seconds"]
    own = sum(r.get("cpu_s", 0.0) for r in held["holder"])
    scale = max(1.0, extra / own) if own > 0 else 1.0
    held["twin scale"] = round(scale, 2)
    return [[(t, c * scale) for t, c in r.get("cpu_trace", [])] for r in held["holder"]]


HELD = {
    "W9": ("readers", "readers (4 RR, 1 tx each)"),
    "W9cpu": ("cpu", "4 CPU spinners"),
    "W9twin": ("twin", "W9's reader CPU, replayed"),
    "W9done": ("history readers", "readers of the history (4 RR)"),
    "W19": ("dump", "pg_dump (paced)"),
}
"""Each PostgreSQL workload's held phase: what holds, and its label in the tables."""


def plan_runs(
    pg: list[str], rate: float, rate60: float | None
) -> list[tuple[str, float, str, str]]:
    """The runs in order, ``(tag, rate, held, label)``: each workload at the fixed rate and, but
    W19, at 60 % of the peak when it was measured."""
    plans = []
    for w in pg:
        held, label = HELD[w]
        if w == "W9twin" and "W9" not in pg[: pg.index(w)]:
            raise SystemExit("W9twin replays W9's readers: name W9 before it")
        for r in [rate] + ([rate60] if rate60 and w != "W19" else []):
            plans.append((f"{w}@{r:.0f}", r, held, label))
    return plans


async def main(args: argparse.Namespace) -> None:
    lengths = (args.phase_seconds,) * 3 if args.phase_seconds else FULL_PHASES
    wanted = args.workloads.split(",")
    started = time.strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(exist_ok=True)
    report: dict[str, Any] = {"started": started, "lengths": lengths, "runs": {}}
    found: list[tuple[str, str, str]] = []
    WORKER_ARGS[:] = horizon.WORKER_ARGS[:] = args.worker_args.split()
    report["worker_args"] = WORKER_ARGS
    report["load at start"] = os.getloadavg()
    print(f"phases: clean {lengths[0]:.0f} s, held {lengths[1]:.0f} s, recovery {lengths[2]:.0f} s;"
          f" load average at start {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")  # fmt: skip

    def log_for(name: str) -> Path:
        return RESULTS / f"readers-{started}-{name}-worker.log"

    pg = [w for w in wanted if w != "W9sqlite"]
    if pg:
        probe = (
            "shared_preload_libraries = 'pg_stat_statements'\n"
            "pg_stat_statements.track_planning = on\n"
            if args.statements
            else ""
        )
        with stock_cluster(extra_conf=probe) as cluster:
            report["settings"] = await settings(cluster.url)
            print("server settings:", ", ".join(f"{k}={v}" for k, v in report["settings"].items()))
            pg_dump = f"/usr/lib/postgresql/{cluster.version}/bin/pg_dump"
            rate60 = None
            if any(w in ("W9", "W9cpu", "W9twin", "W9done") for w in pg) and not args.no_peak:
                peak_s = args.peak_seconds or min(30.0, max(15.0, lengths[0]))
                peak = args.peak or await horizon.peak(
                    await create_database(cluster.url, "readers_peak"), peak_s
                )
                report["peak"] = peak
                rate60 = PEAK_SHARE * peak
                how = "given" if args.peak else f"one default worker flooded for {peak_s:.0f} s"
                print(f"\npeak: {peak:,.0f} jobs/s ({how}); 60 %: {rate60:,.0f}")
            plans = plan_runs(pg, args.rate, rate60)
            traces: dict[float, list[Any]] = {}
            for tag, rate, held, label in plans:
                url = await create_database(cluster.url, "readers_" + tag.lower().replace("@", "_"))
                phases = phases_for(held, label, lengths)
                if held == "twin":
                    phases[1].traces = traces[rate]
                run = await Run(
                    url,
                    rate,
                    phases,
                    log_for(tag),
                    pg_dump,
                    statements=args.statements,
                ).run()
                report["runs"][tag] = run
                if held == "readers":
                    traces[rate] = twin_traces(run)
                sent = f"{run['sent']:,} sent of {run['expected']:,}"
                print(f"\n{tag}: {rate:,.0f} jobs/s offered, {sent}")
                print(table(run["phases"], SHOWN))
                held_row, last = run["phases"][1], run["phases"][2]
                print(f"held phase, start → end: {trend(held_row)}")
                back = last.get("dead back after s")
                print(f"recovery: claim p99 back under {P99_BOUND:.0f}x clean after "
                      f"{last.get('recovered after s')} s, dead tuples attached back under the"
                      f" clean phase's largest after {back} s")  # fmt: skip
                print_holder(held_row)
                print("catalogs (total size / n_dead_tup):")
                print(catalog_line(run))
                wl = run["worker log"]
                print(f"worker log: {wl['lines']} lines" + "".join(
                    f"\n  {d['count']} x {d['line']}" for d in wl["distinct"][:5]))  # fmt: skip
                for phase in run["phases"] if args.statements else ():
                    print(f"statements, {phase['phase']}:")
                    print(statement_table(phase["statements"]))
                found += targets(tag, run)
                _save(report, found, started)
    if "W9sqlite" in wanted:
        run = await sqlite_wal(args.rate, lengths, log_for("W9sqlite"))
        report["runs"]["W9sqlite"] = run
        sent = f"{run['sent']:,} sent of {run['expected']:,}"
        print(f"\nW9sqlite: {args.rate:,.0f} jobs/s offered, {sent}; reader {run['reader']}")
        print(table(run["phases"], SHOWN_SQLITE, cpu=False))
        mb = 2**20
        print(f"WAL: clean max {run['WAL clean max bytes'] / mb:.1f} MB,"
              f" max {run['WAL max bytes'] / mb:.1f} MB,"
              f" final {(run['WAL final bytes'] or 0) / mb:.1f} MB; back under 2x the clean max"
              f" after the reader ended: {run['WAL back under 2x clean after s']} (s)")  # fmt: skip
        found += targets("W9sqlite", run)
        _save(report, found, started)
    print("\n| target (one run each) | measured | verdict |\n|---|---|---|")
    for t in found:
        print("| " + " | ".join(t) + " |")
    print(f"\nraw: {RESULTS / f'readers-{started}.json'}; load average at the end "
          f"{os.getloadavg()[0]:.2f}")  # fmt: skip


def _save(report: dict[str, Any], found: list[tuple[str, str, str]], started: str) -> None:
    report["targets"] = found
    (RESULTS / f"readers-{started}.json").write_text(json.dumps(report, indent=1, default=str))


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.readers")
    p.add_argument("--workloads", default="W9,W9cpu,W9twin,W19,W9sqlite")
    p.add_argument(
        "--phase-seconds", type=float, help="short mode: every phase this long (e.g. 20)"
    )
    p.add_argument("--rate", type=float, default=FIXED_RATE, help="the fixed offered rate")
    p.add_argument("--peak", type=float, help="skip the peak's measurement: use this rate")
    p.add_argument("--peak-seconds", type=float, help="how long the peak is measured")
    p.add_argument("--no-peak", action="store_true", help="the fixed rate only")
    p.add_argument("--worker-args", default="", help="options for every worker")
    p.add_argument(
        "--statements",
        action="store_true",
        help="a probe: load pg_stat_statements and print each phase's costliest statements",
    )
    return p.parse_args(argv)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--sqlite-reader"]:
        sqlite_reader(sys.argv[2], float(sys.argv[3]))
    else:
        asyncio.run(main(parse(sys.argv[1:])))
