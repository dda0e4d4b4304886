"""Cron and daylight saving (docs/guides/cron.md): periodic tasks declared on the app, the
slots a schedule fires at across a daylight-saving change, and a worker's scheduler firing a
schedule every second until it has fired three times.

    python examples/cron.py                               # a temporary SQLite file
    python examples/cron.py postgresql://localhost/scratch
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import skiplock

TMP = tempfile.TemporaryDirectory(prefix="skiplock-example-")  # removed at exit
URL = sys.argv[1] if sys.argv[1:] else f"sqlite:///{TMP.name}/cron.db"
app = skiplock.App(URL, timezone="Europe/Paris")  # the schedules' default zone
ticks: list[int] = []
three = asyncio.Event()


@app.periodic("* * * * * *")  # every second: the sixth field is seconds
@app.task(name="tick")
async def tick(timestamp: int) -> None:  # the slot, as Unix seconds
    ticks.append(timestamp)
    if len(ticks) == 3:
        three.set()


@app.task(name="report")
async def report(kind: str, scheduled_at: str) -> None: ...  # the slot, as ISO 8601 UTC


app.schedule(report, "30 2 * * *", name="nightly-report", args=["daily"])


async def main() -> None:
    await app.migrate()
    paris = ZoneInfo("Europe/Paris")
    nightly = app.schedules["nightly-report"]
    print("02:30 every night in Paris, around the spring-forward of 29 March 2026:")
    for slot in nightly.next_fires(datetime(2026, 3, 27, 12, tzinfo=UTC), 3):
        print("  fires at", slot.astimezone(paris).strftime("%a %d %b %H:%M %Z"))

    worker = skiplock.Worker(app)  # every worker runs the scheduler (--no-scheduler: not)
    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(three.wait(), timeout=30)
    worker.request_stop()
    await running
    first = sorted(ticks)[:3]
    print("the worker's scheduler fired 'tick' at", ", ".join(f"+{t - first[0]} s" for t in first))
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
