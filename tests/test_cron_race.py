"""Five scheduler processes race a per-second schedule while one is SIGKILLed every few
seconds (and restarted): every slot must be enqueued exactly once, none missed.

Runs SKIPLOCK_RACE_SECONDS (default 30: about ten kills) on each backend and prints the figures.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import pytest

from .conftest import PG_URL

ROOT = Path(__file__).resolve().parent.parent
APP = "tests.apps.cron_app:app"
DURATION = float(os.environ.get("SKIPLOCK_RACE_SECONDS", "30"))
KILL_EVERY = 3.0
SLACK_S = 3.0
"""How far the first and last slots enqueued may be from the time the schedulers served."""
READY = "scheduler started with"
"""Logged once the process's signal handlers are in place and it is claiming slots."""
pytestmark = pytest.mark.slow


class Scheduler:
    """One ``skiplock scheduler`` process, with its own log."""

    def __init__(self, url: str, log: Path) -> None:
        env = {**os.environ, "SKIPLOCK_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "skiplock", "scheduler", APP, "--log-level", "info"],
                env=env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    async def ready(self, timeout: float = 60) -> None:
        """Until it logged READY (a SIGTERM before that could find no handler installed)."""
        deadline = time.monotonic() + timeout
        while READY not in self.log.read_text():
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, self.log.read_text()
            await asyncio.sleep(0.05)


async def slot_rows(url: str) -> list[tuple[int, float]]:
    """(slot timestamp, seconds from slot to the job row's creation) for every tick job."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        rows = conn.execute("SELECT kwargs, created_at FROM skiplock_jobs").fetchall()
        conn.close()
        return [(json.loads(k)["timestamp"], c - json.loads(k)["timestamp"]) for k, c in rows]
    schema = url.rsplit("schema=", 1)[1]
    conn = await asyncpg.connect(PG_URL)
    rows = await conn.fetch(
        f"SELECT (kwargs->>'timestamp')::bigint AS ts, "
        f'extract(epoch FROM created_at) AS created FROM "{schema}".skiplock_jobs'
    )
    await conn.close()
    return [(r["ts"], float(r["created"]) - r["ts"]) for r in rows]


async def test_five_schedulers_with_kills_enqueue_every_slot_exactly_once(
    db_url: str, tmp_path: Path
) -> None:
    env = {**os.environ, "SKIPLOCK_DATABASE_URL": db_url, "PYTHONPATH": str(ROOT)}
    await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "skiplock", "migrate", APP],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    started = 0

    def start() -> Scheduler:
        nonlocal started
        started += 1
        return Scheduler(db_url, tmp_path / f"scheduler-{started}.log")

    schedulers = [start() for _ in range(5)]
    for scheduler in schedulers:  # the clock starts once they all claim (start-up under load
        await scheduler.ready()  # is seconds, and no slot is owed before a scheduler runs)
    serving_from = time.time()
    kills = 0
    rng = random.Random(1)
    began = time.monotonic()
    try:
        while time.monotonic() - began < DURATION:
            await asyncio.sleep(KILL_EVERY)
            victim = rng.randrange(len(schedulers))
            schedulers[victim].proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(schedulers[victim].proc.wait)
            kills += 1
            schedulers[victim] = start()
        for scheduler in schedulers:
            await scheduler.ready()
        serving_until = time.time()
        for scheduler in schedulers:
            scheduler.proc.send_signal(signal.SIGTERM)
        for scheduler in schedulers:
            code = await asyncio.to_thread(scheduler.proc.wait, 20)
            assert code == 0, scheduler.log.read_text()
    finally:
        for scheduler in schedulers:
            if scheduler.proc.poll() is None:
                scheduler.proc.kill()
                scheduler.proc.wait()
    rows = await slot_rows(db_url)
    per_slot = collections.Counter(ts for ts, _ in rows)
    duplicates = sum(n - 1 for n in per_slot.values())
    first, last = min(per_slot), max(per_slot)
    missed = [ts for ts in range(first, last + 1) if ts not in per_slot]
    lateness = sorted(late for _, late in rows)
    p50 = statistics.median(lateness) * 1000
    p99 = lateness[min(len(lateness) - 1, int(len(lateness) * 0.99))] * 1000
    print(
        f"\n[{db_url.split(':')[0]}] processes=5 kills={kills} slots={len(per_slot)} "
        f"duplicates={duplicates} missed={len(missed)} "
        f"enqueue lateness p50={p50:.1f}ms p99={p99:.1f}ms"
    )
    assert duplicates == 0
    assert missed == []
    # every slot of the time they served was enqueued: the first and the last within a few
    # seconds of it (a slot is enqueued when it falls due, late by a loaded machine's lateness)
    assert first <= serving_from + SLACK_S, (first, serving_from)
    assert last >= serving_until - SLACK_S, (last, serving_until)
    assert len(per_slot) >= DURATION - 2 * SLACK_S
