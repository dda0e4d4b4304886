"""An outage under a running worker, simulated on a real backend (issue 9): claims resume
within a second or two once the database answers again, and the outage is logged once each
way, not once per attempt of every service. (The real PostgreSQL restart is test_outage.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import skiplock
from skiplock import Worker
from skiplock._backends import Backend
from skiplock.errors import BackendUnavailable

NOT_GUARDED = {"open", "close", "migrate", "warm_up"}


class SimulatedOutage:
    """Makes a real backend's operations raise BackendUnavailable while ``down``, and drops
    its live subscriptions when the outage starts, as a database restart would."""

    def __init__(self, backend: Backend) -> None:
        self.down = False
        self.failures: Counter[str] = Counter()
        self._changed = asyncio.Condition()
        self._subscriptions: list[asyncio.Event] = []
        self._in_flight = 0
        for name, method in inspect.getmembers(backend, inspect.iscoroutinefunction):
            if not name.startswith("_") and name not in NOT_GUARDED:
                setattr(backend, name, self._guard(name, method))
        backend.listen = self._guard_listen(backend.listen)  # type: ignore[method-assign]

    async def _check(self, name: str) -> None:
        if self.down:
            async with self._changed:
                self.failures[name] += 1
                self._changed.notify_all()
            raise BackendUnavailable("simulated outage")

    def _guard(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        async def guarded(*args: Any, **kwargs: Any) -> Any:
            await self._check(name)
            self._in_flight += 1
            try:
                return await method(*args, **kwargs)
            finally:
                async with self._changed:
                    self._in_flight -= 1
                    self._changed.notify_all()

        return guarded

    def _guard_listen(self, listen: Callable[..., Any]) -> Callable[..., Any]:
        @contextlib.asynccontextmanager
        async def guarded(on_wake: Callable[[str], None]) -> AsyncIterator[asyncio.Event]:
            await self._check("listen")
            async with listen(on_wake) as lost:
                self._subscriptions.append(lost)
                yield lost

        return guarded

    async def start(self) -> None:
        """Go down between calls: a call already in flight would answer after the outage
        began and (truthfully) report the database back, so wait until none is."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._in_flight == 0)
            self.down = True
        for lost in self._subscriptions:
            lost.set()

    async def failed(self, **at_least: int) -> None:
        """Until each named operation has failed at least that many times."""
        async with asyncio.timeout(60), self._changed:
            await self._changed.wait_for(
                lambda: all(self.failures[name] >= n for name, n in at_least.items())
            )


@pytest.fixture
def longest_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every jittered delay at the top of its range: the worst case, every run."""
    monkeypatch.setattr(random, "uniform", lambda _low, high: high)


@pytest.mark.usefixtures("longest_backoff")
async def test_claims_resume_within_two_seconds_of_the_database_answering(
    app: skiplock.App,
) -> None:
    backend = await app.backend()
    backend.supports_push = False  # no notifier re-subscribing: the producer's own retries
    outage = SimulatedOutage(backend)
    worker = Worker(app, poll_interval_s=0.1)
    claimed = worker.signals.claimed.arm()
    run = asyncio.create_task(worker.run())
    await claimed.wait()
    await outage.start()
    await outage.failed(job_get_available=5)  # well into the outage: the backoff has grown
    claimed.drain()
    outage.down = False
    back_at = time.monotonic()
    await claimed.wait()
    resumed_after = time.monotonic() - back_at
    worker.request_stop()
    await asyncio.wait_for(run, 30)
    assert resumed_after < 2.0, f"claims resumed {resumed_after:.1f}s after the database"


@pytest.mark.usefixtures("longest_backoff")
async def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    app: skiplock.App, caplog: pytest.LogCaptureFixture
) -> None:
    backend = await app.backend()
    outage = SimulatedOutage(backend)
    worker = Worker(app, poll_interval_s=0.05, maintenance_interval_s=0.1, prune_interval_s=0.1)
    claimed = worker.signals.claimed.arm()
    run = asyncio.create_task(worker.run())
    await worker.ready.wait()
    caplog.set_level(logging.INFO, logger="skiplock")
    caplog.clear()
    await outage.start()
    await outage.failed(job_get_available=4, job_reclaim_expired=3, storage_upkeep=3, listen=2)
    outage.down = False
    claimed.drain()
    await claimed.wait()
    worker.request_stop()
    await asyncio.wait_for(run, 30)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == ["database unavailable: simulated outage; retrying"], warnings
    back = [r.getMessage() for r in caplog.records if r.getMessage().startswith("database back")]
    assert len(back) == 1 and back[0].endswith(" s"), back


@pytest.mark.usefixtures("longest_backoff")
async def test_outcomes_waiting_for_the_database_join_the_one_outage_line(
    app: skiplock.App, caplog: pytest.LogCaptureFixture
) -> None:
    """An outcome that cannot be written while the database is away is retried quietly under
    the worker's one outage line, then written once it answers."""
    release = asyncio.Event()

    @app.task(name="held")
    async def held() -> int:
        await release.wait()
        return 7

    handle = await held.aenqueue()
    backend = await app.backend()
    outage = SimulatedOutage(backend)
    worker = Worker(app, poll_interval_s=0.05)
    started = worker.signals.started.arm()
    flushed = worker.signals.flushed.arm()
    run = asyncio.create_task(worker.run())
    await started.wait()
    caplog.set_level(logging.INFO, logger="skiplock")
    caplog.clear()
    await outage.start()
    release.set()
    await outage.failed(job_set_state_if_running_many=4)
    flushed.drain()
    outage.down = False
    await flushed.wait()
    worker.request_stop()
    await asyncio.wait_for(run, 30)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == ["database unavailable: simulated outage; retrying"], warnings
    assert await handle.result(timeout=10) == 7
