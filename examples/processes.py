"""Sync work in processes a timeout can kill (docs/guides/processes.md): a task run in a
child process, one that never yields killed at its timeout, and children recycled after a
number of jobs.

    python examples/processes.py                            # a temporary SQLite file
    python examples/processes.py postgresql://localhost/scratch
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time

import skiplock
from skiplock import JobState, Worker

TMP = tempfile.TemporaryDirectory(prefix="skiplock-example-")  # removed at exit
app = skiplock.App(sys.argv[1] if sys.argv[1:] else f"sqlite:///{TMP.name}/processes.db")


@app.task(executor="process")
def render(pages: int) -> dict[str, int]:
    """Runs in a child process of the worker (its pid is not the worker's)."""
    return {"pages": pages, "pid": os.getpid()}


@app.task(executor="process", timeout=0.5, max_attempts=1)
def stuck() -> None:
    """Pure Python that never yields: on a thread it would run on; here it is killed."""
    while True:
        time.sleep(0)


async def main() -> None:
    await app.migrate()
    renders = [await render.aenqueue(n) for n in range(4)]
    hung = await stuck.aenqueue()
    worker = Worker(app, concurrency=1, child_processes=1, max_tasks_per_child=2)
    await worker.run(burst=True)  # every ready job, then it returns
    results = [await h.result() for h in renders]
    assert all(r["pid"] != os.getpid() for r in results)
    print(f"render: {len(results)} jobs ran in child processes, not the worker's")
    children = sorted({r["pid"] for r in results})
    print(f"{len(results)} jobs ran in {len(children)} child processes (max_tasks_per_child=2)")
    job = await app.get_job(hung.id)
    assert job.state is JobState.DEAD
    if "was killed (SIGTERM)" in job.errors[-1]["message"]:
        print("stuck: dead, its process killed at the timeout (SIGTERM)")
    await app.close()


if __name__ == "__main__":  # a child process imports this module: only the parent runs main
    asyncio.run(main())
