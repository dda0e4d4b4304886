"""The worker's row in the live-worker registry: upserted on every maintenance beat, removed
when the worker stops, and long-silent rows of other workers forgotten.

``skiplock health`` reads it ("is any worker alive?"), as do ``app.workers()`` and the
dashboard, and the other workers' rescuers free a dead worker's leases by it (``liveness``
says how a row is judged dead: past its own silence limit, or its process gone on this
machine). One small upsert per beat per worker: nothing on the claim path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Callable

from .._backends import Backend
from .._backends.params import WorkerBeatParams
from .._config import WorkerConfig
from .._outage import Outage
from .._service import Service
from ..errors import BackendError, BackendUnavailable
from .liveness import gone_after, restarts_from_supervisor, restarts_in_a_row, this_process

log = logging.getLogger("skiplock.worker")

FORGET_AFTER_S = 3600.0
"""A worker row silent this long belongs to a worker gone without a word (SIGKILL, a lost
machine): any beat deletes it."""

LEAVE_TIMEOUT_S = 2.0
"""How long a stopping worker tries to remove its own row (a row left behind is forgotten
after FORGET_AFTER_S, and shows as silent until then)."""


class Presence(Service):
    """Every ``maintenance_interval_s`` (first at start), upserts this worker's registry row."""

    name = "presence"

    def __init__(
        self,
        backend: Backend,
        config: WorkerConfig,
        worker_id: str,
        load: Callable[[], tuple[int, int, float | None]],
        outage: Outage | None = None,
        children: Callable[[], list[tuple[int, int, int]]] | None = None,
    ) -> None:
        """``load()`` answers (jobs held, outcomes recorded, loop time of the last claim);
        ``children()`` the process tasks' children (pid, jobs run, resident bytes)."""
        super().__init__()
        self.backend = backend
        self.config = config
        self.worker_id = worker_id
        self.load = load
        self.children = children
        self.outage = outage or Outage()
        self.gone_after_s = gone_after(config.maintenance_interval_s)
        """The silence after which the others take this worker for dead."""
        self.process = this_process()
        self.restarts = restarts_from_supervisor()
        self._started: float | None = None
        self._answered_since: float | None = None
        self._answered_at: float | None = None

    def answered_for_s(self) -> float:
        """How long the database has answered this worker's beats without a break (a failed
        beat, or one that came more than ``gone_after_s`` after the last, starts again at 0):
        only a worker that could have seen another beat all along may call its silence death."""
        if self._answered_since is None:
            return 0.0
        return asyncio.get_running_loop().time() - self._answered_since

    def _answered(self) -> None:
        now = asyncio.get_running_loop().time()
        last, self._answered_at = self._answered_at, now
        if self._answered_since is None or last is None or now - last > self.gone_after_s:
            self._answered_since = now

    def params(self) -> WorkerBeatParams:
        held, processed, last_claim = self.load()
        now = asyncio.get_running_loop().time()
        if self._started is None:
            self._started = now
        restarts, in_a_row = self.restarts
        return WorkerBeatParams(
            id=self.worker_id,
            name=self.config.name or "",
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=self.config.queues,
            concurrency=self.config.concurrency,
            running=held,
            processed=processed,
            claimed_ago_s=None if last_claim is None else max(0.0, now - last_claim),
            gone_after_s=self.gone_after_s,
            process=self.process,
            restarts=restarts,
            restarts_in_a_row=restarts_in_a_row(in_a_row, now - self._started),
            children=self._children(),
        )

    def _children(self) -> str | None:
        found = self.children() if self.children is not None else []
        return json.dumps(found) if found else None

    async def beat(self) -> None:
        await self.backend.worker_beat(self.params())
        await self.backend.worker_prune(FORGET_AFTER_S)

    async def serve(self) -> None:
        try:
            while True:
                try:
                    await self.beat()
                except BackendUnavailable as exc:
                    self._answered_since = None
                    self.outage.failed(self.name, exc)
                else:
                    self._answered()
                    self.outage.answered()
                self.mark_ready()
                await asyncio.sleep(self.config.maintenance_interval_s)
        finally:
            await self._leave()

    async def _leave(self) -> None:
        """Remove this worker's row, briefly and quietly: the worker is stopping anyway."""
        with contextlib.suppress(BackendError, TimeoutError, asyncio.CancelledError):
            async with asyncio.timeout(LEAVE_TIMEOUT_S):
                await self.backend.worker_delete(self.worker_id)
