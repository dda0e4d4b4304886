"""One lifecycle for every background loop of a worker: start, ready, stop.

A ``Service`` is started inside the worker's TaskGroup (so nothing runs unowned and a
service that dies takes the worker down loudly), reports ready once its first round is in
place, and stops idempotently. ``start`` returns once the service is ready, as anyio's
``TaskGroup.start`` does, so the worker claims only after its notifier listens.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable


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
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            await asyncio.wait([ready, self._task], return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()

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
