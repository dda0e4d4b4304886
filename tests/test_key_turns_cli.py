"""Weighted turns as a user runs them (issue 42): the real CLI worker, ``skiplock worker APP
--concurrency 1`` with every other setting at its default, in a process of its own, gives a
key of weight 3 three starts to the other key's one once its first claim is past."""

from __future__ import annotations

import asyncio
import collections
import subprocess
import sys

import skiplock

from .apps import turns_app
from .helpers import ROOT, Cli, await_until, cli_fixtures

SPEC = "tests.apps.turns_app:app"
MEASURED = 80
"""Starts counted after the first claim's: 20 whole turns of a weight-3 and a weight-1 key."""
cli, app = cli_fixtures(turns_app, SPEC)


def start_worker(cli: Cli, *args: str) -> subprocess.Popen[bytes]:
    """``skiplock worker SPEC ARGS`` as a user starts it (no other option), its output in a
    file of the test's."""
    with open(cli.tmp / "worker.out", "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "skiplock", "worker", SPEC, *args],
            env=cli.env(),
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


async def test_the_cli_worker_at_concurrency_1_gives_a_weight_3_key_three_starts_to_one(
    cli: Cli, app: skiplock.App
) -> None:
    """Both keys backlogged, jobs of 1 to 4 ms; the starts in the order the jobs wrote their
    lines, those of the worker's first claim left out (told apart by their claim time)."""
    task, heavy = turns_app.tenant_work, turns_app.tenant_work.using(key_weight=3)
    jobs = [(heavy if tenant == "heavy" else task).prepare(tenant, n)
            for n in range(100) for tenant in ("heavy", "light")]  # fmt: skip
    await app.enqueue_many(jobs)
    worker = await asyncio.to_thread(start_worker, cli, "--concurrency", "1")
    try:
        await await_until(lambda: len(cli.lines()) > MEASURED + 4, "the starts", 60)
    finally:
        worker.terminate()
        await asyncio.to_thread(worker.wait, 30)
    started = [line.split()[1:] for line in cli.lines()]
    claimed_at = {job_id: (await app.get_job(int(job_id))).attempted_at for _, job_id in started}
    first_claim = min(claimed_at.values())
    starts = [tenant for tenant, job_id in started if claimed_at[job_id] != first_claim]
    assert len(starts) >= MEASURED, (cli.tmp / "worker.out").read_text()
    counted = collections.Counter(starts[:MEASURED])
    assert set(counted) == {"heavy", "light"}, counted
    assert 2.7 <= counted["heavy"] / counted["light"] <= 3.3, counted
