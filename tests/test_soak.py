"""The soak: 20,000 jobs, 4 worker processes, a random one SIGKILLed every 2 s, PostgreSQL
restarted once. Afterwards every job is succeeded exactly once in the table, and duplicate
executions are bounded by kills x the most a worker holds.

SKIPLOCK_SOAK_SECONDS sets how long the killing goes on (default 20; `make soak` runs 60).
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

import skiplock

from .apps import crash_app
from .test_cli import Cli
from .test_outage import pg_version

APP = "tests.apps.crash_app:app"
JOBS = 20_000
WORKERS = 4
CONCURRENCY = 20
DURATION = float(os.environ.get("SKIPLOCK_SOAK_SECONDS", "20"))
pytestmark = [pytest.mark.slow, pytest.mark.soak]


def start(cli: Cli) -> subprocess.Popen[bytes]:
    return cli.start(
        "--concurrency", str(CONCURRENCY), "--maintenance-interval", "0.5", "--log-level", "warning"
    )


async def restart_postgres() -> None:
    command = ["pg_ctlcluster", "--skip-systemctl-redirect", pg_version(), "main"]
    try:
        await asyncio.to_thread(
            subprocess.run, [*command, "restart"], check=True, capture_output=True
        )
    finally:
        await asyncio.to_thread(subprocess.run, [*command, "start"], capture_output=True)


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
        began = time.monotonic()
        while time.monotonic() - began < DURATION:
            await asyncio.sleep(2)
            victim = rng.randrange(WORKERS)
            procs[victim].send_signal(signal.SIGKILL)
            await asyncio.to_thread(procs[victim].wait)
            kills += 1
            procs[victim] = start(cli)
            if not restarts and time.monotonic() - began > DURATION / 2:
                await restart_postgres()
                restarts += 1
        deadline = time.monotonic() + 240
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
            assert await asyncio.to_thread(proc.wait, 60) == 0
        counts = await app.counts()
    finally:
        cli.stop_all()
        await app.close()
    starts = collections.Counter(ln.split()[1] for ln in cli.lines() if ln.startswith("start"))
    duplicates = sum(n - 1 for n in starts.values())
    outputs = "".join((tmp_path / f"worker-{i}.out").read_text() for i in range(len(cli.procs)))
    rejected = outputs.count("lease lost before its outcome")
    print(
        f"\n[soak] jobs={JOBS} workers={WORKERS} kills={kills} pg_restarts={restarts} "
        f"lost={JOBS - counts['succeeded']} duplicates={duplicates} "
        f"rejected_late_completions={rejected} final_states={counts}"
    )
    assert counts == {"pending": 0, "running": 0, "succeeded": JOBS, "cancelled": 0, "dead": 0}
    assert len(starts) == JOBS
    assert duplicates <= kills * CONCURRENCY
