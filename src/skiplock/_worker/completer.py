"""The completer: writes outcomes in batches, one round trip for many jobs.

Outcomes accumulate while a write is in flight, so the batch grows with the load and an idle
worker still writes each outcome at once. A failed write is retried with backoff capped at a
few seconds (an outcome is the most valuable write a worker makes); an outcome is never dropped.
Until it is written its job's lease is still the worker's, so ``unwritten`` tells the heartbeat
which leases to keep renewing. Rows the database no longer holds under our lease are logged as
lost. It is a ``Service``: ``stop`` is graceful (write what is pending, then end).
"""

from __future__ import annotations

import asyncio
import logging
import random

from .._backends import Backend
from .._job import Completion
from ..errors import BackendUnavailable
from .service import Service
from .signals import WorkerSignals

log = logging.getLogger("skiplock.worker")

MAX_BACKOFF_S = 5.0


class Completer(Service):
    name = "completer"

    def __init__(
        self, backend: Backend, max_batch: int, signals: WorkerSignals | None = None
    ) -> None:
        super().__init__()
        self._signals = signals or WorkerSignals()
        self._backend = backend
        self._max_batch = max_batch
        self._pending: list[Completion] = []
        self._writing: list[Completion] = []
        self._arrived = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._closing = False

    def put(self, completion: Completion) -> None:
        self._pending.append(completion)
        self._idle.clear()
        self._arrived.set()

    def close(self) -> None:
        """Finish writing what is pending, then let ``run`` return."""
        self._closing = True
        self._arrived.set()

    def stop(self) -> None:
        self._stopped = True
        self.close()

    async def serve(self) -> None:
        self.mark_ready()
        await self.run()

    def unwritten(self) -> list[Completion]:
        """Outcomes put but not yet in the table (being written, or waiting)."""
        return self._writing + self._pending

    @property
    def idle(self) -> bool:
        return self._idle.is_set()

    async def wait_idle(self) -> None:
        """Until every outcome put so far is written."""
        await self._idle.wait()

    async def run(self) -> None:
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                self._writing = batch
                try:
                    await self._write(batch)
                finally:
                    self._writing = []
                self._signals.flushed.fire([c.job_id for c in batch])
            self._idle.set()
            if self._closing:
                return

    async def _write(self, batch: list[Completion]) -> None:
        failures = 0
        while True:
            try:
                applied = set(await self._backend.job_set_state_if_running_many(batch))
                break
            except BackendUnavailable as exc:
                failures += 1
                delay = random.uniform(0, min(MAX_BACKOFF_S, 0.1 * 2**failures))
                log.warning(
                    "could not record %d outcomes (%s); retrying in %.1fs", len(batch), exc, delay
                )
                await asyncio.sleep(delay)
        for c in batch:
            if c.job_id not in applied:
                log.warning(
                    "job %d: lease lost before its outcome (%s) was recorded; another "
                    "worker owns it now",
                    c.job_id,
                    c.disposition.value,
                )
