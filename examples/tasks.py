"""Tasks, arguments and results (docs/guides/tasks.md): declare tasks with options, enqueue
one, many and later, read results and progress, and see a bad argument refused at enqueue.

    python examples/tasks.py                          # a temporary SQLite file
    python examples/tasks.py postgresql://localhost/scratch
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from datetime import timedelta

import skiplock

TMP = tempfile.TemporaryDirectory(prefix="skiplock-example-")  # removed at exit
app = skiplock.App(sys.argv[1] if sys.argv[1:] else f"sqlite:///{TMP.name}/tasks.db")


@app.task(queue="email", max_attempts=5, timeout=30, permanent=(ValueError,))
async def send_receipt(order_id: int, *, copy_to: str | None = None) -> str:
    return f"receipt {order_id}" + (f", copy to {copy_to}" if copy_to else "")


@app.task
def render_report(day: str) -> int:  # a plain function: runs on the worker's thread pool
    return len(day)


@app.task
async def import_rows(rows: list[str]) -> int:
    job = skiplock.current_job()
    for i, _row in enumerate(rows):
        await job.set_progress((i + 1) / len(rows), message=f"row {i + 1}")
    return len(rows)


async def main() -> None:
    await app.migrate()
    receipt = await send_receipt.aenqueue(7, copy_to="books@example.com")
    report = await render_report.aenqueue("2026-11-29")
    imported = await import_rows.aenqueue(["a", "b", "c"])
    many = await app.enqueue_many(send_receipt.prepare(i) for i in range(100))
    later = await send_receipt.using(priority=10, run_after=timedelta(hours=1)).aenqueue(8)
    print(f"enqueued {3 + len(many) + 1} jobs; job {later.id} runs in an hour")

    try:
        await send_receipt.aenqueue(float("nan"))  # arguments are strict JSON
    except skiplock.PayloadError as error:
        print("refused at enqueue:", error)

    outcomes = await app.drain()  # every ready job, in this process
    print(f"drained {len(outcomes)} jobs")
    print("send_receipt:", await receipt.result(timeout=30))
    print("render_report:", await report.result(timeout=30))
    progress = await imported.progress()
    assert progress is not None
    print(f"import_rows: {await imported.result(timeout=30)} rows, progress {progress['message']}")
    print("still pending:", (await later.fetch()).state.value)
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
