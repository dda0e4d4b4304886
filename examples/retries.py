"""Retries and dead letters (docs/guides/retries.md): a flaky call retried until it succeeds,
a failure that is permanent at once, and dead jobs listed, requeued and discarded.

    python examples/retries.py                            # a temporary SQLite file
    python examples/retries.py postgresql://localhost/scratch
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

import skiplock
from skiplock import JobState, Retry, current_job

TMP = tempfile.TemporaryDirectory(prefix="skiplock-example-")  # removed at exit
app = skiplock.App(sys.argv[1] if sys.argv[1:] else f"sqlite:///{TMP.name}/retries.db")


@app.task(name="call_partner", max_attempts=3)
async def call_partner() -> str:
    if current_job().attempt < 3:
        raise Retry(in_s=0, reason="rate limited")  # the partner asked us to come back
    return "done on the third attempt"


@app.task(name="charge", permanent=(KeyError,))
async def charge(customer: str) -> None:
    raise KeyError(f"no customer {customer!r}")  # retrying helps nobody: dead at once


@app.task(name="import_feed", max_attempts=2, retry=skiplock.RetryPolicy(base_s=0, cap_s=0))
async def import_feed(url: str) -> None:
    raise TimeoutError(f"{url} did not answer")


async def drain_until_final(*handles: skiplock.JobHandle) -> None:
    """Run ready jobs until each of these has reached a final state."""
    while [h for h in handles if (await h.fetch()).state not in JobState.final()]:
        await app.drain()


async def main() -> None:
    await app.migrate()
    partner = await call_partner.aenqueue()
    charged = await charge.aenqueue("cus_404")
    feeds = [await import_feed.aenqueue(f"https://{x}.example/feed") for x in "ab"]
    await drain_until_final(partner, charged, *feeds)

    retried = [e["attempt"] for e in (await partner.fetch()).errors]
    print(f"call_partner: {await partner.result()} (attempts {retried} were retried)")
    record = await charged.fetch()
    print(
        f"charge: {record.state.value} at attempt {record.attempt}: {record.errors[-1]['message']}"
    )

    timeouts = skiplock.JobFilter(task=import_feed.name, error="did not answer")
    dead = await app.list_jobs(JobState.DEAD, timeouts)
    print(f"import_feed: {len(dead)} dead after {dead[0].attempt} attempts each")
    requeued = await app.requeue_dead(timeouts, who="alice")  # fixed upstream? run them again
    await drain_until_final(*feeds)
    discarded = await app.discard_dead(timeouts, who="alice")  # still failing: give up on them
    audit = (await app.get_job(discarded[0])).audit
    print(
        f"requeued {len(requeued)}, then discarded {len(discarded)}: {[a['what'] for a in audit]}"
    )
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
