"""Tasks for the chord past jsonb's limit (tests/test_workflow_big_chord.py): members that
each return 7 MB (within this app's ``max_result_bytes``), a body given the list of all of
them, and a plain job a worker still runs afterwards."""

from __future__ import annotations

import skiplock

RESULT_CHARS = 7_000_000
"""Each member's result: 40 make 280 MB, past jsonb's 256 MiB (issue 42's 1,100 results of
250 kB made 275 MB; fewer, larger results cross the same limit in a fraction of the time)."""

app = skiplock.App(max_result_bytes=RESULT_CHARS + 1000)  # SKIPLOCK_DATABASE_URL: the test's


@app.task(name="big")
async def big(n: int) -> str:
    return chr(ord("a") + n % 26) * RESULT_CHARS


@app.task(name="count")
async def count(values: list[str]) -> int:
    return len(values)


@app.task(name="plain")
async def plain(n: int) -> int:
    return n
