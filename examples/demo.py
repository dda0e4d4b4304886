"""skiplock's main job on the embedded SQLite default: `make demo`.

Starts a worker, enqueues a few hundred example jobs of several kinds (I/O-bound and CPU-bound
jobs, a flaky and a poisoned one, a delayed one, a periodic task, tenants capped by a
concurrency key, a chord, a batch with its callback and a job waiting for a signal), shows live
progress, and ends with a summary. Exits 0 when every job reached its expected state; Ctrl-C
stops the worker cleanly (running jobs finish, claimed ones go back to pending).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import skiplock

DB = Path("skiplock-demo.db")
app = skiplock.App(f"sqlite:///{DB}")
heartbeats: list[int] = []
syncing: Counter[str] = Counter()
most_at_once: Counter[str] = Counter()


@app.task(name="demo.fetch_page", queue="io")
async def fetch_page(url: str) -> int:
    """I/O-bound: waits like an HTTP call would."""
    await asyncio.sleep(random.uniform(0.01, 0.1))
    return len(url)


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


@app.periodic("* * * * * */2")  # every two seconds (the sixth field is seconds)
@app.task(name="demo.heartbeat")
async def heartbeat(timestamp: int) -> None:
    """Periodic: the worker's scheduler enqueues it once per slot; it gets the slot's time."""
    heartbeats.append(timestamp)


@app.task(name="demo.sync_tenant", concurrency_key=lambda tenant, page: tenant, key_limit=2)
async def sync_tenant(tenant: str, page: int) -> None:
    """Tenant-capped: at most 2 of one tenant's jobs run at once, whatever the concurrency."""
    syncing[tenant] += 1
    most_at_once[tenant] = max(most_at_once[tenant], syncing[tenant])
    await asyncio.sleep(0.05)
    syncing[tenant] -= 1


@app.task(name="demo.total")
async def total(sizes: list[int]) -> int:
    """A chord's body: runs once, with every fetch's result."""
    return sum(sizes)


@app.task(name="demo.zip_thumbnails")
async def zip_thumbnails(batch_id: int) -> str:
    """A batch's callback: runs once, when the last thumbnail of the batch succeeded."""
    info = await app.batch_info(batch_id)
    return f"zipped {info.counts['succeeded']} thumbnails"


@app.task(name="demo.refund")
async def refund(order_id: int) -> str:
    """Waits for a person: parks (no slot, no lease) until the signal 'approved' comes."""
    decision = await skiplock.current_job().wait_for("approved")
    return f"order {order_id} refunded, approved by {decision['by']}"


def line(counts: dict[str, int], elapsed: float) -> str:
    total = sum(counts.values())
    final = counts["succeeded"] + counts["dead"] + counts["cancelled"]
    width = 30
    filled = int(width * final / total) if total else width
    bar = "#" * filled + "." * (width - filled)
    parts = " ".join(f"{state}={n}" for state, n in counts.items())
    return f"[{bar}] {final}/{total} final  {parts}  {elapsed:5.1f}s"


async def enqueue_everything() -> dict[str, skiplock.JobHandle]:
    """The demo's jobs; the ones the summary reads back, by name."""
    await app.enqueue_many(
        [fetch_page.prepare(f"https://example.com/{i}") for i in range(300)]
        + [sync_tenant.prepare(tenant, page) for tenant in ("acme", "globex") for page in range(10)]
    )
    async with app.batch(on_success=zip_thumbnails.s()) as batch:
        await app.enqueue_many(thumbnail.prepare(i) for i in range(40))
    pages = [fetch_page.s(f"https://example.org/{i}") for i in range(5)]
    return {
        "chord": await skiplock.chord(pages, total.s()).aenqueue(),
        "batch": await app.job((await batch.info()).on_success),
        "flaky": await flaky_partner.aenqueue(),
        "poison": await poison.aenqueue(),
        "reminder": await reminder.using(run_after=timedelta(seconds=3)).aenqueue("stand up"),
        "refund": await refund.aenqueue(1042),
    }


async def watch(jobs: dict[str, skiplock.JobHandle], started: float) -> bool:
    """Progress until every job is final and the heartbeat fired twice; the refund's signal
    is sent once it has waited a moment. False after 50 s."""
    tty = sys.stdout.isatty()
    signalled = False
    while True:
        counts = await app.counts()
        print(line(counts, time.monotonic() - started), end="\r" if tty else "\n")
        refund_state = (await jobs["refund"].fetch()).state
        if not signalled and refund_state is skiplock.JobState.WAITING and counts["waiting"] == 1:
            await app.signal(jobs["refund"].id, "approved", {"by": "ann"})  # a person approves
            signalled = True
        if not counts["pending"] + counts["running"] + counts["waiting"] and len(heartbeats) >= 2:
            return True
        if time.monotonic() - started > 50:
            print("\ndemo did not finish in 50 s", file=sys.stderr)
            return False
        await asyncio.sleep(0.5)


async def summary(jobs: dict[str, skiplock.JobHandle]) -> bool:
    counts = await app.counts()
    print("\nsummary (including the periodic heartbeat's jobs)")
    print(f"  {'state':<10} {'jobs':>5}")
    for state, n in counts.items():
        print(f"  {state:<10} {n:>5}")
    flaky = await jobs["flaky"].fetch()
    dead = await jobs["poison"].fetch()
    print(f"\nflaky_partner: {flaky.state} after {flaky.attempt} attempts")
    last_error = dead.errors[-1]["message"]
    print(f"poison: {dead.state} after {dead.attempt} attempts; last error: {last_error}")
    print(f"heartbeat (every 2 s, from the worker's scheduler): fired for slots {heartbeats}")
    print(f"sync_tenant (key_limit=2): at most {dict(most_at_once)} at once, with 20 slots")
    print(f"chord of 5 fetches, then total: {await jobs['chord'].result(timeout=5)}")
    print(f"batch of 40 thumbnails, then its callback: {await jobs['batch'].result(timeout=5)}")
    print(f"refund, after waiting for a signal: {await jobs['refund'].result(timeout=5)}")
    return counts["dead"] == 1 and max(most_at_once.values()) <= 2


async def main() -> int:
    for path in (DB, Path(f"{DB}-wal"), Path(f"{DB}-shm")):
        path.unlink(missing_ok=True)
    await app.migrate()
    worker = skiplock.Worker(app, concurrency=20, poll_interval_s=0.2, shutdown_timeout_s=5)
    started = time.monotonic()
    running = asyncio.create_task(worker.run())
    try:
        jobs = await enqueue_everything()
        print(
            f"enqueued {sum((await app.counts()).values())} jobs into {app.url}; "
            "worker running with concurrency 20"
        )
        finished = await watch(jobs, started)
    finally:  # Ctrl-C too: stop claiming, let running jobs finish, give the rest back
        worker.request_stop()
        await running
    print()
    ok = finished and await summary(jobs)
    await app.close()
    return 0 if ok else 1


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)
    try:
        sys.exit(asyncio.run(main()))
    except KeyboardInterrupt:
        print(f"\ninterrupted: the worker stopped cleanly; {DB} keeps the jobs")
        sys.exit(130)
