"""The app the many-tenants benchmarks (benchmarks/tenants.py) run through the CLI.

Each job returns when it started and ended by this machine's wall clock (its result column),
so the bench reads every attempt's interval back from the table: the first start of each key
(W12) and how many jobs of one key overlapped (W13).
"""

from __future__ import annotations

import asyncio
import time

import skiplock

app = skiplock.App()


async def _run(seconds: float) -> list[float]:
    started = time.time()
    await asyncio.sleep(seconds)
    return [started, time.time()]


@app.task(name="tenant", concurrency_key=lambda key, ms: key)
async def tenant(key: str, ms: float) -> list[float]:
    """A tenant's job: turns between keys, no cap (W12)."""
    return await _run(ms / 1000)


@app.task(name="untenanted")
async def untenanted(key: str, ms: float) -> list[float]:
    """The same job without a key (W12's baseline)."""
    return await _run(ms / 1000)


@app.task(name="capped", concurrency_key=lambda key, ms: key, key_limit=2)
async def capped(key: str, ms: float) -> list[float]:
    """At most two of a key at once, everywhere (W13)."""
    return await _run(ms / 1000)


_RETRY = skiplock.RetryPolicy(base_s=0.05, cap_s=0.2)
"""W14's retries come back within a fifth of a second (a failed head holds its key that long)."""


async def _flaky(n: int, ms: float) -> list[float]:
    """A job of W14: one in 20 fails its first attempt (and is retried)."""
    if n % 20 == 7 and skiplock.current_job().attempt == 1:
        raise ConnectionError("the first try of one job in 20 fails")
    return await _run(ms / 1000)


@app.task(name="ordered", ordering_key=lambda key, n, ms: key, retry=_RETRY)
async def ordered(key: str, n: int, ms: float) -> list[float]:
    """One at a time per key, in enqueue order, through retries (W14)."""
    return await _flaky(n, ms)


@app.task(name="debounced", debounce=0.2, unique_key=lambda key, n: f"debounce:{key}")
async def debounced(key: str, n: int) -> list[float]:
    """W15: a key's enqueues within 0.2 s of each other gathered into one run, which gets the
    last one's arguments (``n``, read back from the row)."""
    return await _run(0)


@app.task(name="unordered", retry=_RETRY)
async def unordered(key: str, n: int, ms: float) -> list[float]:
    """W14's baseline: the same jobs, no key."""
    return await _flaky(n, ms)
