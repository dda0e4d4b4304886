"""skiplock's main job on the embedded SQLite default: `make demo`.

Starts a worker, enqueues a few hundred example jobs of several kinds, shows live progress,
and ends with a summary of job states. Exits 0 when every job reached its expected state.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

import skiplock

DB = Path("skiplock-demo.db")
app = skiplock.App(f"sqlite:///{DB}")
attempts_seen: dict[str, int] = {}


@app.task(name="demo.fetch_page", queue="io")
async def fetch_page(url: str) -> None:
    """I/O-bound: waits like an HTTP call would."""
    await asyncio.sleep(random.uniform(0.01, 0.1))


@app.task(name="demo.thumbnail", queue="cpu", timeout=30)
def thumbnail(image_id: int) -> str:
    """CPU-bound and synchronous: runs on the worker's thread pool, never on the loop."""
    digest = str(image_id).encode()
    for _ in range(20_000):
        digest = hashlib.sha256(digest).digest()
    return digest.hex()


@app.task(name="demo.flaky_partner", retry=skiplock.RetryPolicy(base_s=0.5, cap_s=2))
async def flaky_partner() -> None:
    """Fails twice, then succeeds: retried with backoff, idempotent by job id."""
    job = skiplock.current_job()
    if job.attempt < 3:
        raise ConnectionError(f"partner API unavailable (attempt {job.attempt})")


@app.task(name="demo.poison", max_attempts=3, retry=skiplock.RetryPolicy(base_s=0.2, cap_s=1))
async def poison() -> None:
    """Always fails: ends `dead`, with every attempt's error kept for a person to read."""
    raise ValueError("this payload can never be processed")


@app.task(name="demo.reminder")
async def reminder(text: str) -> None:
    """Delayed: enqueued now, runs a few seconds later."""


heartbeats: list[int] = []


@app.periodic("* * * * * */2")  # every two seconds (the sixth field is seconds)
@app.task(name="demo.heartbeat")
async def heartbeat(timestamp: int) -> None:
    """Periodic: the worker's scheduler enqueues it once per slot; it gets the slot's time."""
    heartbeats.append(timestamp)


def line(counts: dict[str, int], elapsed: float) -> str:
    total = sum(counts.values())
    final = counts["succeeded"] + counts["dead"] + counts["cancelled"]
    width = 30
    filled = int(width * final / total) if total else width
    bar = "#" * filled + "." * (width - filled)
    parts = " ".join(f"{state}={n}" for state, n in counts.items())
    return f"[{bar}] {final}/{total} final  {parts}  {elapsed:5.1f}s"


async def main() -> int:
    for path in (DB, Path(f"{DB}-wal"), Path(f"{DB}-shm")):
        path.unlink(missing_ok=True)
    await app.migrate()
    worker = skiplock.Worker(app, concurrency=20, poll_interval_s=0.2, shutdown_timeout_s=5)
    started = time.monotonic()
    running = asyncio.create_task(worker.run())

    handles = await app.enqueue_many(
        [fetch_page.prepare(f"https://example.com/{i}") for i in range(300)]
        + [thumbnail.prepare(i) for i in range(40)]
    )
    handles.append(await flaky_partner.aenqueue())
    handles.append(await poison.aenqueue())
    handles.append(await reminder.using(run_after=timedelta(seconds=3)).aenqueue("stand up"))
    total = len(handles)
    print(f"enqueued {total} jobs into {app.url}; worker running with concurrency 20")

    tty = sys.stdout.isatty()
    ids = {h.id for h in handles}
    while True:
        counts = await app.counts()
        print(line(counts, time.monotonic() - started), end="\r" if tty else "\n")
        states = [(await app.get_job(i)).state for i in ids]
        if all(state in skiplock.JobState.final() for state in states) and len(heartbeats) >= 2:
            break
        if time.monotonic() - started > 50:
            print("\ndemo did not finish in 50 s", file=sys.stderr)
            return 1
        await asyncio.sleep(0.5)
    worker.request_stop()
    await running
    print()

    counts = await app.counts()
    print("\nsummary (including the periodic heartbeat's jobs)")
    print(f"  {'state':<10} {'jobs':>5}")
    for state, n in counts.items():
        print(f"  {state:<10} {n:>5}")
    flaky = await handles[-3].fetch()
    dead = await handles[-2].fetch()
    print(f"\nflaky_partner: {flaky.state} after {flaky.attempt} attempts")
    print(
        f"poison: {dead.state} after {dead.attempt} attempts; last error: "
        f"{dead.errors[-1]['message']}"
    )
    print(f"heartbeat (every 2 s, from the worker's scheduler): fired for slots {heartbeats}")
    await app.close()
    ok = counts["succeeded"] >= total - 1 + len(heartbeats) and counts["dead"] == 1
    return 0 if ok else 1


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)
    sys.exit(asyncio.run(main()))
