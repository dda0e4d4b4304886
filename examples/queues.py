"""Bounded queues and rate limits (docs/guides/queues.md): a queue's bound refuses the enqueue
that would pass it, a rate limit spaces the starts, and a paused queue waits for its resume.

    python examples/queues.py                             # a temporary SQLite file
    python examples/queues.py postgresql://localhost/scratch
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time

import skiplock

TMP = tempfile.TemporaryDirectory(prefix="skiplock-example-")  # removed at exit
app = skiplock.App(sys.argv[1] if sys.argv[1:] else f"sqlite:///{TMP.name}/queues.db")
started: list[float] = []


@app.task(name="send", queue="email")
async def send(to: str) -> None:
    started.append(time.monotonic())


async def main() -> None:
    await app.migrate()
    await app.set_queue_limits("email", max_depth=4, rate_per_s=2)
    for i in range(4):
        await send.aenqueue(f"user{i}@example.com")
    try:
        await send.aenqueue("one-too-many@example.com")
    except skiplock.QueueFull as full:
        print("refused:", full)

    await app.pause_queue("email")
    print("paused: drained", len(await app.drain()), "jobs")
    await app.resume_queue("email")

    worker = skiplock.Worker(app, concurrency=10)
    running = asyncio.create_task(worker.run())
    while len(started) < 4:  # at most 2 starts in any one second
        await asyncio.sleep(0.05)
    worker.request_stop()
    await running
    print(f"resumed: 4 jobs started over {started[-1] - started[0]:.1f} s (rate_per_s=2)")
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
