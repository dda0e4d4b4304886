"""Workflows (docs/guides/workflows.md): a chain, a chord, a batch with its callback, a durable
step and a job that waits for a signal, all run by a worker in this process.

    python examples/workflows.py                          # a temporary SQLite file
    python examples/workflows.py postgresql://localhost/scratch
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

import skiplock

TMP = tempfile.TemporaryDirectory(prefix="skiplock-example-")  # removed at exit
app = skiplock.App(sys.argv[1] if sys.argv[1:] else f"sqlite:///{TMP.name}/workflows.db")


@app.task(name="add")
async def add(x: int, y: int) -> int:
    return x + y


@app.task(name="total")
async def total(values: list[int]) -> int:
    return sum(values)


@app.task(name="resize")
async def resize(image: int) -> None:
    await asyncio.sleep(0.01)


@app.task(name="zip_them")
async def zip_them(batch_id: int) -> str:
    info = await app.batch_info(batch_id)
    return f"zipped {info.counts['succeeded']} images"


MANAGERS = {"ann"}
"""Who may approve a refund: the sender of the signal decides, not a name in its payload."""


@app.task(name="refund")
async def refund(order_id: int) -> str:
    job = skiplock.current_job()
    # a step runs once: when the job resumes after the signal, it returns its stored result
    asked = await job.step("ask", lambda: f"asked a manager about order {order_id}")
    while True:
        # parks the job (no slot, no lease) until a signal comes; with_sender: who sent it
        approval = await job.wait_for("approved", with_sender=True)
        if approval.sender in MANAGERS:
            return f"{asked}; refunded by {approval.sender}"
        await job.step("ignored", print, f"ignored an approval from {approval.sender}")


async def main() -> None:
    await app.migrate()
    worker = skiplock.Worker(app, concurrency=10)
    running = asyncio.create_task(worker.run())

    chain = await (add.s(1, 2) | add.s(10) | add.s(100)).aenqueue()  # (1 + 2) + 10, then + 100
    print("chain add(1, 2) | add(10) | add(100) =", await chain.result(timeout=30))

    fan = await skiplock.chord([add.s(i, i) for i in range(4)], total.s()).aenqueue()
    print("chord of add(i, i) for i in 0..3, then total =", await fan.result(timeout=30))

    async with app.batch(on_success=zip_them.s()) as batch:
        for image in range(10):
            await resize.aenqueue(image)
    info = await batch.info()
    callback = await app.job(info.on_success)
    print("batch of 10 resizes, then its callback:", await callback.result(timeout=30))

    waiting = await refund.aenqueue(17)
    while (await waiting.fetch()).state is not skiplock.JobState.WAITING:
        await asyncio.sleep(0.05)
    print(f"refund job {waiting.id} is waiting for the signal 'approved'")
    # the payload claims ann; the sender (the dashboard's signed-in user, or who= here) decides
    receipt = await app.signal(waiting.id, "approved", {"by": "ann"}, who="mallory")
    print("signal sent:", receipt.outcome.value)
    await app.signal(waiting.id, "approved", who="ann")  # kept for the next wait if early
    print("refund:", await waiting.result(timeout=30))

    worker.request_stop()
    await running
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
