"""A job's own log (docs/guides/job-logs.md): two jobs logging side by side, each keeping its
own lines per attempt, a retried job's log of each attempt, and the cap keeping the tail.

    python examples/job_logs.py                            # a temporary SQLite file
    python examples/job_logs.py postgresql://localhost/scratch
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile

import skiplock
from skiplock import Retry, current_job

TMP = tempfile.TemporaryDirectory(prefix="skiplock-example-")  # removed at exit
app = skiplock.App(sys.argv[1] if sys.argv[1:] else f"sqlite:///{TMP.name}/job_logs.db")
log = logging.getLogger("example")


@app.task(job_log=True)
async def sync_account(account_id: int) -> None:
    log.info("fetching account %s", account_id)
    await asyncio.sleep(0.05)  # the other job logs meanwhile: its lines are its own
    log.warning("account %s: rate limited, slowing down", account_id)


@app.task(job_log=True, max_attempts=2)
async def flaky() -> None:
    log.info("attempt %s starts", current_job().attempt)
    if current_job().attempt == 1:
        raise Retry(in_s=0, reason="the partner timed out")


@app.task(job_log=True, job_log_bytes=256)
async def chatty() -> None:
    for n in range(50):
        log.info("line %02d", n)


async def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("example").setLevel(logging.INFO)  # let its INFO lines through
    await app.migrate()
    a, b = await sync_account.aenqueue(1), await sync_account.aenqueue(2)
    retried, talker = await flaky.aenqueue(), await chatty.aenqueue()
    handles = (a, b, retried, talker)
    while [h for h in handles if (await h.fetch()).state not in skiplock.JobState.final()]:
        await app.drain()
    for handle, account in ((a, 1), (b, 2)):
        (only,) = await app.job_logs(handle.id)
        said = [line.message for line in only.lines]
        assert all(f"account {account}" in m for m in said), said
        print(f"job {account}: {len(said)} lines, all its own: {said[-1]}")
    attempts = await app.job_logs(retried.id)
    print(f"flaky: a log for each of its {len(attempts)} attempts")
    (kept,) = await app.job_logs(talker.id)
    print(f"chatty: kept the tail ({kept.lines[-1].message}), cut {kept.cut_lines} lines")
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
