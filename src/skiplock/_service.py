"""One lifecycle for every background loop of skiplock: start, ready, stop.

A ``Service`` inside a worker is started in the worker's TaskGroup (so nothing runs unowned
and a service that dies takes the worker down loudly), reports ready once its first round is
in place, and stops idempotently. ``start`` returns once the service is ready, as anyio's
``TaskGroup.start`` does, so the worker claims only after its notifier listens.

The loops that live outside a worker (an App's result watch, the dashboard's sampler, the
Starlette lifespan's in-process worker) have no TaskGroup to die into, so the same class runs
them *detached* (``start_detached()``, or ``spawn()`` from sync code): an unexpected
error is logged at once, kept in ``error`` and handed to ``on_error`` (so the owner can fail
whoever waits on the loop), and a detached service whose run ended may be started again.
It sits below the worker (it imports nothing of skiplock) so every floor can use it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable

log = logging.getLogger("skiplock")


class ServiceState(enum.Enum):
    NEW = "new"
    STARTING = "starting"
    READY = "ready"
    STOPPED = "stopped"


class Service:
    """Subclasses implement ``serve`` and call ``mark_ready`` once they are doing their job."""

    name = "service"

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stopped = False
        self.on_ready: Callable[[str], None] | None = None
        self.on_error: Callable[[BaseException], None] | None = None
        """Detached only: called (after the log line) with what an unexpected end raised."""
        self.error: BaseException | None = None
        """Detached only: what the last run died of (None while it runs or if it ended well)."""

    async def serve(self) -> None:
        raise NotImplementedError

    def mark_ready(self) -> None:
        if not self._ready.is_set():
            self._ready.set()
            if self.on_ready is not None:
                self.on_ready(self.name)

    async def start(self, tg: asyncio.TaskGroup) -> None:
        """Run ``serve`` in ``tg``; return once it is ready (or has already ended)."""
        if self._task is not None:
            return
        self._task = tg.create_task(self.serve(), name=f"skiplock-{self.name}")
        await self._until_ready(self._task)

    async def start_detached(self) -> None:
        """``spawn`` (see the module docstring), then return once ready (or ended)."""
        self.spawn()
        assert self._task is not None
        await self._until_ready(self._task)

    async def _until_ready(self, task: asyncio.Task[None]) -> None:
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            await asyncio.wait([ready, task], return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()

    def spawn(self) -> None:
        """Run ``serve`` detached on a task of its own in the running loop, without waiting
        for ready; nothing if it runs already; a run that ended is started afresh."""
        if self._task is not None and not self._task.done():
            return
        self._ready = asyncio.Event()
        self._stopped = False
        self.error = None
        self._task = asyncio.create_task(self.serve(), name=f"skiplock-{self.name}")
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        error = None if task.cancelled() else task.exception()
        if error is None:
            return
        self.error = error
        log.error("%s died", self.name, exc_info=error)
        if self.on_error is not None:
            self.on_error(error)

    def raise_error(self) -> None:
        """Detached: re-raise what the last run died of, if it died."""
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        """Ask the service to end; idempotent. The default cancels its loop."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()

    def cancel(self) -> None:
        """End the service now, whatever ``stop`` would have let it finish."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()

    async def join(self) -> None:
        """Until the service's task ended (however it ended)."""
        if self._task is not None:
            await asyncio.wait([self._task])

    @property
    def state(self) -> ServiceState:
        if self._task is None:
            return ServiceState.NEW
        if self._task.done() or self._stopped:
            return ServiceState.STOPPED
        return ServiceState.READY if self._ready.is_set() else ServiceState.STARTING
