"""The app the "CLI worker at defaults" rows run: ``skiplock worker`` exactly as a user starts it.

    SKIPLOCK_DATABASE_URL=... SKIPLOCK_BENCH_EXPECT=200 \\
        skiplock worker benchmarks.cli_app:app --concurrency 20

No ``--burst``, no ``--poll-interval``, the default log level: a long-running process that the
harness stops with SIGTERM (benchmarks/run.py, ``cli_worker``). The jobs time themselves on
CLOCK_MONOTONIC (one clock for every process), so the figures come from the jobs' own starts
and ends, never from the process's start-up or its shutdown. Two lines go to stdout, which the
harness reads: ``READY`` when the first warm-up ``mark`` job (sequence -1) runs, and ``DONE
{json}`` once ``SKIPLOCK_BENCH_EXPECT`` jobs have ended. The task names match
``benchmarks/adapters.py``, which queues the jobs.
"""

from __future__ import annotations

import asyncio
import json
import os

import skiplock

from .adapters import SLEEP_S
from .common import REC

app = skiplock.App()
_ready_sent = False


def _done() -> None:
    """The expected count has ended: hand the timings to the harness."""
    report = {
        "first_start": REC.first_start,
        "last_end": REC.last_end,
        "done": REC.done,
        "starts": {str(seq): t for seq, t in REC.starts.items()},
        "loop": type(asyncio.get_running_loop()).__module__.split(".")[0],
    }
    print("DONE " + json.dumps(report), flush=True)


REC.expected = int(os.environ.get("SKIPLOCK_BENCH_EXPECT", "0")) or None
REC.on_expected = _done


@app.task(name="noop")
async def noop() -> None:
    REC.start()
    REC.end()


@app.task(name="sleep")
async def sleep() -> None:
    REC.start()
    await asyncio.sleep(SLEEP_S)
    REC.end()


@app.task(name="mark")
async def mark(seq: int) -> None:
    """W4: the start time under the sequence number the feeder gave; -1 is a warm-up."""
    global _ready_sent
    if seq < 0:
        if not _ready_sent:
            _ready_sent = True
            print("READY", flush=True)
        REC.done += 1  # counted (the feeder's warm-up too), never timed
        return
    REC.start(seq)
    REC.end()
