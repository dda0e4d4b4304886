"""The soak: 20,000 jobs, 4 worker processes, a random one SIGKILLed every 2 s, PostgreSQL
restarted once. Afterwards every job is succeeded exactly once in the table, and every
duplicate execution is explained: the earlier run was in a process we SIGKILLed, or its worker
logged that it lost that job's lease (a lease can lapse while PostgreSQL is down; another
worker's sweep then hands the job on). A killed process was running at most CONCURRENCY jobs;
the rest of its repeated jobs had finished but their outcome was not yet written.

SKIPLOCK_SOAK_SECONDS sets how long the killing goes on (default 20; `make soak` runs 60).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

import skiplock

from .apps import crash_app
from .conftest import restart_postgres
from .helpers import Cli

APP = "tests.apps.crash_app:app"
JOBS = 20_000
WORKERS = 4
CONCURRENCY = 20
DURATION = float(os.environ.get("SKIPLOCK_SOAK_SECONDS", "20"))
DRAIN_S = 240.0
"""How long, after the killing stops, every job may take to succeed."""
STOP_S = 60.0
"""How long each worker may take to exit on SIGTERM."""
BUDGET_S = DURATION + 60.0 + DRAIN_S + WORKERS * STOP_S
"""The test's own timeout: its deadlines must fire (with their message) before pytest's
does (the default 120 s would cut a 240 s drain short and say nothing of why)."""
pytestmark = [pytest.mark.slow, pytest.mark.soak, pytest.mark.timeout(BUDGET_S)]


def start(cli: Cli) -> subprocess.Popen[bytes]:
    return cli.start(
        "--concurrency", str(CONCURRENCY), "--maintenance-interval", "0.5", "--log-level", "warning"
    )


@dataclasses.dataclass
class Accounting:
    jobs_run: int  # distinct jobs that started at least once
    leases_lost: int  # (process, job) pairs a worker logged as lost
    unexplained: list[tuple[str, list[tuple[int, str]]]]  # repeats with no kill or lost lease
    repeated_by: collections.Counter[int]  # per process: its runs that were run again
    cut_short: collections.Counter[int]  # per process: runs that never finished, lease kept


def account(cli: Cli, killed: set[int]) -> Accounting:
    """From the execution log and the workers' output: the repeated jobs no kill or lost lease
    explains, how many repeated runs each process had, and how many runs each left unfinished."""
    runs: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    done: set[tuple[str, int]] = set()
    for line in cli.lines():
        word, n, process, *rest = line.split()
        if word == "start":
            runs[n].append((int(process), rest[0]))
        elif word == "done":
            done.add((n, int(process)))
    lease_lost: set[tuple[int, str]] = set()
    for i, proc in enumerate(cli.procs):
        for job_id in re.findall(r"job (\d+): lease lost", cli.output(i)):
            lease_lost.add((proc.pid, job_id))
    unexplained: list[tuple[str, list[tuple[int, str]]]] = []
    repeated_by: collections.Counter[int] = collections.Counter()
    cut_short: collections.Counter[int] = collections.Counter()
    for n, starts in runs.items():
        for pid, job_id in starts[:-1]:
            repeated_by[pid] += 1
            if pid not in killed and (pid, job_id) not in lease_lost:
                unexplained.append((n, starts))
        for pid, job_id in starts:
            # a run its worker cancelled on losing the lease is not one the kill cut short
            if (n, pid) not in done and (pid, job_id) not in lease_lost:
                cut_short[pid] += 1
    return Accounting(len(runs), len(lease_lost), unexplained, repeated_by, cut_short)


async def test_soak_kills_and_a_database_restart_lose_nothing(pg_url: str, tmp_path: Path) -> None:
    cli = Cli(pg_url, tmp_path, APP)
    assert cli.run("migrate", APP).returncode == 0
    crash_app.app.url = pg_url
    app = crash_app.app
    try:
        await app.enqueue_many(crash_app.soak.prepare(n) for n in range(JOBS))
        await app.close()
        procs = [start(cli) for _ in range(WORKERS)]
        rng = random.Random(7)
        kills = restarts = 0
        killed: set[int] = set()
        began = time.monotonic()
        while time.monotonic() - began < DURATION:
            await asyncio.sleep(2)
            victim = rng.randrange(WORKERS)
            procs[victim].send_signal(signal.SIGKILL)
            killed.add(procs[victim].pid)
            await asyncio.to_thread(procs[victim].wait)
            kills += 1
            procs[victim] = start(cli)
            if not restarts and time.monotonic() - began > DURATION / 2:
                await restart_postgres()
                restarts += 1
        deadline = time.monotonic() + DRAIN_S
        while True:
            try:
                counts = await app.counts()
            except skiplock.BackendError:
                await app.close()
                counts = {"succeeded": 0}
            if counts["succeeded"] == JOBS:
                break
            assert time.monotonic() < deadline, (counts, cli.output(0)[-3000:])
            await asyncio.sleep(1)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            assert await asyncio.to_thread(proc.wait, STOP_S) == 0
        counts = await app.counts()
    finally:
        cli.stop_all()
        await app.close()
    acc = account(cli, killed)
    duplicates = sum(acc.repeated_by.values())
    after_kills = sum(acc.repeated_by[pid] for pid in killed)
    print(
        f"\n[soak] jobs={JOBS} workers={WORKERS} kills={kills} pg_restarts={restarts} "
        f"lost={JOBS - counts['succeeded']} duplicates={duplicates} "
        f"(after a kill: {after_kills}; after a lease lost: {duplicates - after_kills}) "
        f"leases_lost={acc.leases_lost} final_states={counts}"
    )
    assert counts == {
        "pending": 0,
        "running": 0,
        "claimed": 0,
        "succeeded": JOBS,
        "cancelled": 0,
        "dead": 0,
        "waiting": 0,
    }
    assert acc.jobs_run == JOBS
    assert not acc.unexplained, acc.unexplained[:10]
    assert all(acc.cut_short[pid] <= CONCURRENCY for pid in killed), acc.cut_short
