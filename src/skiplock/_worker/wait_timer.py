"""The wait timer: a parked ``wait_for`` times out when its timeout comes, not at a sweep.

A job parked on a signal is ``waiting`` until its signal or its timeout. The timeout is the
job's ``run_at``; nothing claims a waiting job, so something must turn it pending when that
time comes. The rescuer's sweep does, every ``maintenance_interval_s`` (5 s): a backstop, too
coarse for a wait of a second. This service sleeps until the first parked wait comes due and
ends it then (``workflow_expire_waits``: the timeout recorded, the job pending, its queue's
workers woken), the way the producer sleeps until the next pending job comes due.

It learns the deadlines two ways: this worker's completer tells it of each job it parks
(``due_in``: at once, no query), and it asks the database for the first deadline of any parked
job when it starts, after each expiry and once a maintenance interval (jobs parked by other
workers, or before this one started).

A failure other than an outage (a bug of ours, a trigger of the user's refusing a row) is
logged, once while it repeats, and tried again a maintenance interval later: it must not end
the worker that runs every other job (the rescuer's sweep, the backstop, then takes the
waits past their timeout on its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math

from .._backends import Backend
from .._outage import Outage
from .._service import Service
from ..errors import BackendUnavailable

log = logging.getLogger("skiplock.worker")

RETRY_S = 1.0
"""How soon an expiry the database did not answer is tried again."""


class WaitTimer(Service):
    name = "wait-timer"

    def __init__(self, backend: Backend, reread_s: float, outage: Outage | None = None) -> None:
        super().__init__()
        self.backend = backend
        self.reread_s = reread_s
        """How often the database is asked for the first deadline (the maintenance interval)."""
        self.outage = outage or Outage()
        self._due_at = math.inf
        """The loop time the first parked wait known here times out (inf: none known)."""
        self._changed = asyncio.Event()
        self._failure: str | None = None
        """The last error of a read or an expiry while they fail (logged once, not each time)."""
        self.expiry = asyncio.Lock()
        """Held while this worker ends waits past their timeout (the wait timer, the rescuer's
        sweep and a burst's end share one, ``Worker``): the expiry skips rows another holds, so
        a burst that looked while another service of its own was ending a wait would see it
        neither waiting nor pending, and end with the job left to run."""

    def due_in(self, delay_s: float) -> None:
        """A job this worker parked times out in ``delay_s``: end its wait then."""
        due_at = asyncio.get_running_loop().time() + delay_s
        if due_at < self._due_at:
            self._due_at = due_at
            self._changed.set()

    async def serve(self) -> None:
        self.mark_ready()
        loop = asyncio.get_running_loop()
        read_at = -math.inf
        while True:
            if loop.time() - read_at >= self.reread_s:
                await self._read()
                read_at = loop.time()
            if loop.time() >= self._due_at:
                self._due_at = math.inf
                await self._expire()
                read_at = -math.inf  # the next deadline may be any parked job's: ask
                continue
            self._changed.clear()
            until = min(self._due_at, read_at + self.reread_s)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, until - loop.time())):
                    await self._changed.wait()

    async def _read(self) -> None:
        """The first deadline of any parked job, from the database."""
        try:
            due_in = await self.backend.workflow_next_wait_timeout()
        except BackendUnavailable as exc:
            self.outage.failed(self.name, exc)
            return
        except Exception as exc:
            await self._failed("reading the first wait's timeout", exc)
            return
        self._working()
        if due_in is not None:
            self.due_in(max(due_in, 0.0))

    async def _expire(self) -> None:
        try:
            async with self.expiry:
                expired = await self.backend.workflow_expire_waits()
        except BackendUnavailable as exc:
            self.outage.failed(self.name, exc)
            self.due_in(RETRY_S)
            return
        except Exception as exc:  # never the worker's end: the next try, or the sweep
            await self._failed("ending the waits past their timeout", exc)
            return
        self._working()
        self.outage.answered()
        if expired:
            log.info("wait timer: %d waits timed out", len(expired))

    async def _failed(self, what: str, exc: Exception) -> None:
        """Log a failure (once while it repeats), then hold off a maintenance interval: the
        next read would find the same wait due at once and fail again, in a tight loop."""
        if str(exc) != self._failure:
            log.error("wait timer: %s failed; tried again later: %s", what, exc, exc_info=exc)
        self._failure = str(exc)
        await asyncio.sleep(max(RETRY_S, self.reread_s))

    def _working(self) -> None:
        if self._failure is not None:
            log.info("wait timer: working again")
            self._failure = None
