"""The completer: writes outcomes in batches, one round trip for many jobs.

Outcomes accumulate while a write is in flight, so the batch grows with the load and an idle
worker still writes each outcome at once. A failed write is retried with backoff capped at a
few seconds (an outcome is the most valuable write a worker makes); an outcome is never dropped.
A write that fails for any other reason (``BAD_ROW_ERRORS``) is split: the batch is written
row by row, so one outcome the database refuses is recorded ``dead`` with the reason and never
holds back the others (issue 9: one ``Retry(in_s=inf)`` left a whole batch ``running``).
Until it is written its job's lease is still the worker's: the ledger holds it (and the
heartbeat renews it) until the completer marks it written. Rows the database no longer holds
under our lease are logged and marked lost. It is a ``Service``: ``stop`` is graceful (write
what is pending, then end).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime

from .._backends import Backend
from .._job import Completion, Disposition
from .._job_log import JobLog
from .._limits import MAX_SECONDS
from .._observe.meter import Meter
from .._outage import Outage, retry_delay
from .._service import Service
from ..errors import BackendError, BackendUnavailable
from .classify import MAX_MESSAGE_CHARS
from .ledger import Ledger
from .signals import WorkerSignals

log = logging.getLogger("skiplock.worker")

MAX_BACKOFF_S = 5.0

ALONE_TRIES = 3

BAD_ROW_ERRORS: tuple[type[Exception], ...] = (BackendError, TypeError, ValueError, OverflowError)
"""What one bad outcome makes a write raise (a database refusal that is not an outage, a value
the driver cannot encode). Anything else is a bug and stops the worker loudly."""


FINISHING = frozenset({Disposition.SUCCEED, Disposition.CANCEL, Disposition.DEAD})
"""The outcomes a result waiter is woken by."""


REQUEUED = frozenset({Disposition.RETRY, Disposition.SNOOZE, Disposition.RELEASE})
"""The outcomes that put a job back to pending, due again after the outcome's delay."""

PARKED = frozenset({Disposition.PARK})
"""The outcome that parks a job on a signal, its wait timing out after the outcome's delay."""


class Completer(Service):
    name = "completer"

    def __init__(
        self,
        backend: Backend,
        max_batch: int,
        signals: WorkerSignals | None = None,
        on_finished: Callable[[Iterable[int]], None] | None = None,
        outage: Outage | None = None,
        meter: Meter | None = None,
    ) -> None:
        super().__init__()
        self.meter = meter or Meter()
        """Told each batch written and how long its oldest outcome waited (completer lag)."""
        self._waiting_since = 0.0
        self._outage = outage or Outage()
        """The worker's one view of the database: an outage is logged once, not per retry."""
        self._on_finished = on_finished
        """Told the ids a batch finished, lazily: this process's result waiters (if any)."""
        self._signals = signals or WorkerSignals()
        self._backend = backend
        self.backend = backend
        """The database it writes to (the runner's jobs' steps and waits go there too)."""
        self._max_batch = max_batch
        self._pending: list[Completion] = []
        self._writing: list[Completion] = []
        self._arrived = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._closing = False
        self.ledger: Ledger | None = None
        """The worker's ledger, told each outcome written (or its lease lost): until then
        the lease is held (None: a completer on its own, as in a test)."""
        self.on_written: Callable[[list[int]], None] | None = None
        """Told the ids of each batch once it is written (in the table: a key's slot frees
        only then, so the producer claims that key's next job after this)."""
        self.on_requeued: Callable[[float], None] | None = None
        """Told, after a batch is written, the shortest delay of the jobs it put back to
        pending (a retry, a snooze): the producer wakes when that one comes due."""
        self.on_parked: Callable[[float], None] | None = None
        """Told, after a batch is written, the shortest timeout of the jobs it parked on a
        signal: the wait timer ends that wait when it comes due."""

    def put(self, completion: Completion) -> None:
        if not self._pending:
            self._waiting_since = asyncio.get_running_loop().time()
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
                since, self._waiting_since = self._waiting_since, asyncio.get_running_loop().time()
                try:
                    await self._write(batch)
                finally:
                    self._writing = []
                self.meter.written(batch, asyncio.get_running_loop().time() - since)
                if self._on_finished is not None:
                    self._on_finished(c.job_id for c in batch if c.disposition in FINISHING)
                ids = [c.job_id for c in batch]
                self._signals.flushed.fire(ids)
                if self.on_written is not None:
                    self.on_written(ids)
                self._tell_requeued(batch)
            self._idle.set()
            if self._closing:
                return

    def _tell_requeued(self, batch: list[Completion]) -> None:
        for tell, kinds in ((self.on_requeued, REQUEUED), (self.on_parked, PARKED)):
            if tell is not None:
                delays = [c.delay_s for c in batch if c.disposition in kinds]
                if delays:
                    tell(min(delays))

    async def _write(self, batch: list[Completion]) -> None:
        ledger = self.ledger
        batch = [c if 0.0 <= c.delay_s <= MAX_SECONDS else _out_of_bounds(c) for c in batch]
        await self._write_logs([c.log for c in batch if c.log is not None])
        try:
            applied = await self._write_through_outages(batch)
        except BAD_ROW_ERRORS as exc:
            log.warning(
                "could not record a batch of %d outcomes (%s); writing them one by one",
                len(batch),
                exc,
            )
            applied = set()
            for c in batch:
                applied |= await self._write_alone(c)
        if len(applied) == len(batch):  # every outcome took (the usual batch): no lookups
            if ledger is not None:
                ledger.written_all(batch)
            for c in batch:
                if c.on_recorded is not None:
                    c.on_recorded()
            return
        for c in batch:
            if c.job_id in applied:
                if ledger is not None:
                    ledger.written(c.job_id, c.lease_token)
                if c.on_recorded is not None:
                    c.on_recorded()
            else:
                if ledger is not None:
                    ledger.lost(c.job_id, c.lease_token)
                log.warning(
                    "job %d: lease lost before its outcome (%s) was recorded; another "
                    "worker owns it now",
                    c.job_id,
                    c.disposition.value,
                )

    async def _write_logs(self, logs: list[JobLog]) -> None:
        """The batch's job logs (``job_log=True``), in one write just before its outcomes
        (their own statement: the outcome's statements stay as they are; docs/design.md).
        An outage is waited out as an outcome's is; a log the database refuses is dropped
        with a warning, never holding back the outcomes."""
        failures = 0
        while logs:
            try:
                await self._backend.job_logs_write(logs)
            except BackendUnavailable as exc:
                failures += 1
                self._outage.failed(self.name, exc)
                await asyncio.sleep(retry_delay(failures, first_s=0.1, cap_s=MAX_BACKOFF_S))
                continue
            except BAD_ROW_ERRORS as exc:
                log.warning("could not keep the logs of %d attempts (%s)", len(logs), exc)
            return

    async def _write_through_outages(self, batch: list[Completion]) -> set[int]:
        """Write, retrying an outage with capped backoff until the database answers."""
        failures = 0
        while True:
            try:
                applied = set(await self._backend.job_set_state_if_running_many(batch))
            except BackendUnavailable as exc:
                failures += 1
                self._outage.failed(self.name, exc)
                await asyncio.sleep(retry_delay(failures, first_s=0.1, cap_s=MAX_BACKOFF_S))
                continue
            self._outage.answered()
            return applied

    async def _write_alone(self, completion: Completion) -> set[int]:
        """One outcome on its own; if it still fails (a few tries, in case the batch's error
        was passing), the job is recorded dead with the reason instead."""
        for attempt in range(ALONE_TRIES):
            try:
                return await self._write_through_outages([completion])
            except BAD_ROW_ERRORS as exc:
                error = exc
                await asyncio.sleep(0.05 * attempt)
        completion.on_recorded = None  # its own outcome was never recorded: the dead one is
        log.error(
            "job %d: its outcome (%s) cannot be recorded (%s); recording it as dead",
            completion.job_id,
            completion.disposition.value,
            error,
        )
        try:
            return await self._write_through_outages([_buried(completion, error)])
        except BAD_ROW_ERRORS as exc:
            log.error(
                "job %d: not even its dead-letter can be recorded (%s); it stays leased and "
                "will be reclaimed when the lease expires",
                completion.job_id,
                exc,
            )
            return {completion.job_id}  # not lost to another worker: no second warning


def _buried(completion: Completion, exc: BaseException) -> Completion:
    """The same job, dead, with why its own outcome could not be written."""
    reason = f"outcome {completion.disposition.value} could not be recorded: {exc}"
    attempt = completion.error.get("attempt", 0) if isinstance(completion.error, dict) else 0
    error = {
        "attempt": attempt if isinstance(attempt, int) else 0,
        "at": datetime.now(UTC).isoformat(),
        "message": reason[:MAX_MESSAGE_CHARS],
        "traceback": "",
    }
    return replace(
        completion, disposition=Disposition.DEAD, delay_s=0.0, error=error, on_recorded=None
    )


def _out_of_bounds(completion: Completion) -> Completion:
    """A delay that would overflow a timestamp (built without ``Retry``'s checks)."""
    why = ValueError(f"delay_s={completion.delay_s!r} is not within 0..{MAX_SECONDS:g} s")
    return _buried(completion, why)
