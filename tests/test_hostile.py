"""Rows another producer wrote, and values that slipped past every check: the worker records
such jobs ``dead`` with the reason and goes on; it never exits on them (issue 9, item 6)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

import skiplock
from skiplock import JobState
from skiplock._worker.worker import Worker

DEEP = "[" * 10_000 + "]" * 10_000


async def burst(app: skiplock.App) -> None:
    await asyncio.wait_for(Worker(app, poll_interval_s=0.05, scheduler=False).run(burst=True), 60)


@pytest.mark.parametrize(
    ("args_json", "kwargs_json"),
    [(f"[{DEEP}]", "{}"), ("[]", f'{{"k": {DEEP}}}'), ('{"not": "a list"}', "{}")],
    ids=["deep-args", "deep-kwargs", "args-not-a-list"],
)
async def test_a_poison_row_is_dead_and_the_worker_goes_on(
    app: skiplock.App, args_json: str, kwargs_json: str
) -> None:
    @app.task(name="t")
    async def t(*args: object, **kwargs: object) -> None:
        pass

    good_before = await t.aenqueue(1)
    poison = dataclasses.replace(t.prepare(), args_json=args_json, kwargs_json=kwargs_json)
    (bad,) = await app.enqueue_many([poison])
    good_after = await t.aenqueue(2)
    await burst(app)
    # Counted, not fetched: reading such a row back is the storage side's part of issue 9.
    counts = await app.counts()
    assert counts.get(JobState.DEAD, 0) == 1 and counts.get(JobState.SUCCEEDED, 0) == 2
    for handle in (good_before, good_after):
        assert (await handle.fetch()).state is JobState.SUCCEEDED
    if args_json.startswith("{"):  # decodable for the reader: the reason is on the row
        assert "corrupt payload" in (await bad.fetch()).errors[-1]["message"]
