"""Many tenants, one queue (docs/guides/keys.md): a concurrency key caps each account at two
jobs at once on every worker, and an ordering key runs one order's steps one at a time, in
the order they were enqueued.

    python examples/keys.py                               # a temporary SQLite file
    python examples/keys.py postgresql://localhost/scratch
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections import Counter

import skiplock

TMP = tempfile.TemporaryDirectory(prefix="skiplock-example-")  # removed at exit
app = skiplock.App(sys.argv[1] if sys.argv[1:] else f"sqlite:///{TMP.name}/keys.db")
running: Counter[str] = Counter()
most: Counter[str] = Counter()
steps: list[tuple[int, str]] = []


@app.task(name="sync_page", concurrency_key=lambda account, page: f"account:{account}", key_limit=2)
async def sync_page(account: int, page: int) -> None:
    key = f"account:{account}"
    running[key] += 1
    most[key] = max(most[key], running[key])
    await asyncio.sleep(0.05)  # the call to the account's API
    running[key] -= 1


@app.task(name="fulfil", ordering_key=lambda order, step: f"order:{order}")
async def fulfil(order: int, step: str) -> None:
    steps.append((order, step))


async def main() -> None:
    await app.migrate()
    pages = [sync_page.prepare(account, page) for account in (1, 2, 3) for page in range(6)]
    orders = [fulfil.prepare(o, s) for s in ("charge", "pack", "ship") for o in (1, 2)]
    handles = await app.enqueue_many(pages + orders)

    worker = skiplock.Worker(app, concurrency=20)  # 20 slots, yet at most 2 per account
    running_worker = asyncio.create_task(worker.run())
    await app.gather(handles, timeout=60)
    worker.request_stop()
    await running_worker

    for key, n in sorted(most.items()):
        print(f"{key}: at most {n} of its 6 pages at once (key_limit=2)")
    for order in (1, 2):
        print(f"order:{order} ran", " -> ".join(s for o, s in steps if o == order))
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
