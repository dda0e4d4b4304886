"""A worker's background services that need nothing of its jobs: wake-ups and pruning.

Each runs forever in the worker's TaskGroup and survives database outages by retrying with
capped, jittered backoff; the TaskGroup cancels them when the worker stops.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

from .._backends import Backend
from .._backends.base import JobPruneParams
from .._config import WorkerConfig
from ..errors import BackendUnavailable

log = logging.getLogger("skiplock.worker")

MAX_BACKOFF_S = 30.0
PRUNE_BATCH = 1000
PRUNE_MAX_BATCHES = 100


async def listen_forever(
    backend: Backend, on_wake: Callable[[str], None], wake: asyncio.Event
) -> None:
    """Keep a push subscription alive (re-subscribe after every loss), calling ``on_wake``.

    ``wake`` is set on every (re)subscription: anything enqueued while we were not listening
    is caught up on at once.
    """
    if not backend.supports_push:
        return
    failures = 0
    while True:
        try:
            async with backend.listen(on_wake) as lost:
                failures = 0
                wake.set()
                await lost.wait()
                log.warning("lost the LISTEN connection; reconnecting")
        except BackendUnavailable as exc:
            failures += 1
            delay = random.uniform(0, min(MAX_BACKOFF_S, 0.5 * 2**failures))
            log.warning("LISTEN failed (%s); retrying in %.1fs", exc, delay)
            await asyncio.sleep(delay)


async def prune_forever(backend: Backend, config: WorkerConfig) -> None:
    """Delete finished rows past their retention, in bounded batches (short locks)."""
    while True:
        await asyncio.sleep(config.prune_interval)
        params = JobPruneParams(config.retention_finished, config.retention_dead, PRUNE_BATCH)
        try:
            removed = 0
            for _ in range(PRUNE_MAX_BATCHES):
                batch = await backend.job_prune(params)
                removed += batch
                if batch < PRUNE_BATCH:
                    break
                await asyncio.sleep(0.01)  # let claims in between batches
            if removed:
                log.info("pruned %d finished jobs past retention", removed)
        except BackendUnavailable as exc:
            log.warning("pruning failed (%s); will retry", exc)
