"""Whether a database's skiplock schema is the one this skiplock writes, and waiting until it
answers with it. Shared by ``App`` (``check_schema``, ``wait_for_database``) and a ``Worker``
given an open backend, so both wait the same way: unreachable is retried with capped,
jittered backoff; an outdated or newer schema raises SchemaError at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable

from ._backends import Backend
from ._url import mask_url
from .errors import BackendUnavailable, SchemaError

log = logging.getLogger("skiplock")


async def refuse_newer(backend: Backend, url: str) -> None:
    """SchemaError if a newer skiplock wrote the schema: this skiplock's statements could
    silently write rows the newer one misreads."""
    current, latest = await backend.schema_version()
    if current > latest:
        raise SchemaError(
            f"the database at {mask_url(url)} has skiplock schema version {current}, "
            f"newer than this skiplock's {latest}: upgrade skiplock"
        )


async def check_current(backend: Backend, url: str) -> None:
    """SchemaError, saying what to run, unless the schema is exactly current."""
    current, latest = await backend.schema_version()
    if current < latest:
        raise SchemaError(
            f"the database at {mask_url(url)} has skiplock schema version {current}, "
            f"this skiplock needs {latest}: run `skiplock migrate APP` first"
        )
    if current > latest:
        raise SchemaError(
            f"the database schema (version {current}) is newer than this skiplock "
            f"(version {latest}): upgrade skiplock"
        )


async def wait_until_current(
    check: Callable[[], Awaitable[None]], stopping: asyncio.Event | None = None
) -> bool:
    """Until ``check`` passes: BackendUnavailable is retried with capped, jittered backoff
    (a worker started during a database restart waits for it); anything else raises. False
    if ``stopping`` was set first."""
    failures = 0
    while stopping is None or not stopping.is_set():
        try:
            return await _unless_set(stopping, check())
        except BackendUnavailable as exc:
            failures += 1
            delay = random.uniform(0, min(30.0, 0.5 * 2**failures))
            log.warning("database unavailable (%s); retrying in %.1fs", exc, delay)
            if stopping is None:
                await asyncio.sleep(delay)
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await stopping.wait()
    return False


async def _unless_set(stopping: asyncio.Event | None, work: Awaitable[None]) -> bool:
    """Await ``work``, unless ``stopping`` is set first: then cancel it and answer False.
    A connect to a server that accepts and never answers must not hold a signal back."""
    if stopping is None:
        await work
        return True
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait((task, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task.cancelled():
        return False
    task.result()  # raises what the work raised
    return True
