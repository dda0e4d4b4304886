"""What a person's reads cost the rotation (issue 44): how often a rotation's truncate would find
a live segment held while the dashboard's readings run.

A PostgreSQL cluster of the bench's own (benchmarks/cluster.py, stock settings) holding
``--window-rows`` jobs finished in the last five minutes (the window ``app.stats()`` reads by
default) and 2,000 pending ones. One thread reads in a loop for ``--seconds`` (``app.stats()``,
or ``app.counts()``: ``--read``); another does what the rotator does to a segment every 20 ms
(``LOCK TABLE`` of the newest live generation ``IN ACCESS EXCLUSIVE MODE`` under a 10 ms
``lock_timeout``, rolled back). Printed: the readings done and their median time, the
reader's CPU seconds, the lock attempts and how many timed out, and the longest run of
timed-out attempts in a row.

    python -m benchmarks.read_locks [--window-rows 290000] [--seconds 20] [--read stats|counts]

Run it once on the code before issue 44's readers (``PYTHONPATH`` at that tree's ``src``) and once
on today's to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from typing import Any

import asyncpg

import skiplock

from .cluster import create_database, stock_cluster

PROBE_EVERY_S = 0.02
LOCK_TIMEOUT_MS = 10  # the rotator's (postgres_storage.LIVE_LOCK_TIMEOUT_MS)


async def fill(url: str, rows: int) -> None:
    app = skiplock.App(url)
    await app.migrate()
    await app.close()
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            f"""INSERT INTO skiplock_jobs (queue, task, max_attempts, state, attempt, attempted_at,
                                           ready_at, started_at, finished_at, run_s, created_at,
                                           run_at)
                SELECT 'q' || (i % 4), 't' || (i % 7), 3, 'succeeded', 1,
                       now() - make_interval(secs => i * 290.0 / {rows}) - interval '5 ms',
                       now() - make_interval(secs => i * 290.0 / {rows}) - interval '10 ms',
                       now() - make_interval(secs => i * 290.0 / {rows}) - interval '5 ms',
                       now() - make_interval(secs => i * 290.0 / {rows}), 0.004,
                       now() - interval '1 hour', now() - interval '1 hour'
                FROM generate_series(1, {rows}) i;
                INSERT INTO skiplock_jobs (queue, task, max_attempts, state, segment)
                SELECT 'q' || (i % 4), 't' || (i % 7), 3, 'pending', 3
                FROM generate_series(1, 2000) i;
                ANALYZE skiplock_jobs;"""
        )
    finally:
        await conn.close()


async def read(url: str, what: str, seconds: float, out: dict[str, Any]) -> None:
    app = skiplock.App(url)
    times: list[float] = []
    cpu = time.thread_time()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            await (app.stats(window_s=300) if what == "stats" else app.counts())
            times.append(time.perf_counter() - started)
    finally:
        await app.close()
    out.update(readings=len(times), median_ms=1000 * statistics.median(times))
    out["reader_cpu_s"] = time.thread_time() - cpu


async def probe(url: str, stop: threading.Event, out: dict[str, Any]) -> None:
    conn = await asyncpg.connect(url)
    # the newest live generation (migration 27), or the ring's first segment on code before it
    table = await conn.fetchval(
        "SELECT CASE WHEN to_regclass('skiplock_live_segment') IS NULL"
        " THEN 'skiplock_jobs_live_s0' ELSE 'skiplock_jobs_live_s'"
        " || pg_sequence_last_value('skiplock_live_segment'::regclass) END"
    )
    tries = failed = run = longest = 0
    try:
        while not stop.is_set():
            tries += 1
            try:
                async with conn.transaction():
                    await conn.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
                    await conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
                    raise _RolledBack
            except _RolledBack:
                run = 0
            except asyncpg.exceptions.LockNotAvailableError:
                failed += 1
                run += 1
                longest = max(longest, run)
            await asyncio.sleep(PROBE_EVERY_S)
    finally:
        await conn.close()
    out.update(lock_tries=tries, lock_timed_out=failed, longest_run=longest)


class _RolledBack(Exception):
    """Ends the probe's transaction the way a failed truncate's does: nothing kept."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window-rows", type=int, default=290_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--read", choices=("stats", "counts"), default="stats")
    args = parser.parse_args()
    with stock_cluster("readers") as cluster:
        url = asyncio.run(create_database(cluster.url, "readers"))
        asyncio.run(fill(url, args.window_rows))
        reading: dict[str, Any] = {}
        probing: dict[str, Any] = {}
        stop = threading.Event()
        prober = threading.Thread(target=lambda: asyncio.run(probe(url, stop, probing)))
        prober.start()
        try:
            asyncio.run(read(url, args.read, args.seconds, reading))
        finally:
            stop.set()
            prober.join()
    share = probing["lock_timed_out"] / max(1, probing["lock_tries"])
    print(
        f"{args.read}: {reading['readings']} readings, median {reading['median_ms']:.0f} ms, "
        f"reader CPU {reading['reader_cpu_s']:.1f} s in {args.seconds:g} s; rotator-like locks: "
        f"{probing['lock_timed_out']}/{probing['lock_tries']} timed out ({100 * share:.0f} %), "
        f"longest run {probing['longest_run']} in a row"
    )


if __name__ == "__main__":
    main()
