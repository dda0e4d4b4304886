"""Test hooks: named events a test can await, free in production (River's ``testsignal``).

A worker fires its signals at the moments tests care about (a claim came back, outcomes were
flushed, a lease was lost...). An unarmed signal's ``fire`` is one attribute test and nothing
else, so production pays nothing. A test arms the signals it wants before the moment happens,
then awaits them instead of sleeping and hoping on a loaded machine::

    worker = Worker(app)
    lost = worker.signals.lease_lost.arm()
    ...
    job_id = await lost.wait(timeout=10)
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime
from typing import Generic, TypeVar

T = TypeVar("T")

DEFAULT_WAIT_S = 30.0


class Signal(Generic[T]):
    """One named moment. Values fired while armed queue up until a test takes them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._fired: asyncio.Queue[T] | None = None

    def arm(self) -> Signal[T]:
        """Start recording; idempotent. Returns the signal for ``x = s.arm()`` use."""
        if self._fired is None:
            self._fired = asyncio.Queue()
        return self

    @property
    def armed(self) -> bool:
        return self._fired is not None

    def fire(self, value: T) -> None:
        """Record ``value`` if a test armed this signal; otherwise do nothing."""
        if self._fired is not None:
            self._fired.put_nowait(value)

    async def wait(self, timeout: float = DEFAULT_WAIT_S) -> T:
        """The next value fired (oldest first); TimeoutError naming the signal after
        ``timeout`` seconds."""
        if self._fired is None:
            raise RuntimeError(f"signal {self.name!r} was never armed")
        try:
            async with asyncio.timeout(timeout):
                return await self._fired.get()
        except TimeoutError:
            raise TimeoutError(f"signal {self.name!r} did not fire in {timeout}s") from None

    async def wait_for(self, wanted: T, timeout: float = DEFAULT_WAIT_S) -> None:
        """Until ``wanted`` is fired, skipping any other values."""
        async with asyncio.timeout(timeout):
            while await self.wait(timeout) != wanted:
                pass

    def drain(self) -> list[T]:
        """Every value fired and not yet taken, without waiting."""
        taken: list[T] = []
        while self._fired is not None and not self._fired.empty():
            taken.append(self._fired.get_nowait())
        return taken


@dataclasses.dataclass(frozen=True)
class WorkerSignals:
    """Every hook a worker fires, and the value each carries."""

    ready: Signal[str] = dataclasses.field(default_factory=lambda: Signal("ready"))
    """A service reported ready (its name); ``"worker"`` once all of them are."""
    claimed: Signal[list[int]] = dataclasses.field(default_factory=lambda: Signal("claimed"))
    """A claim returned (the job ids, possibly none)."""
    started: Signal[int] = dataclasses.field(default_factory=lambda: Signal("started"))
    """A claimed job was given a slot and its task started (the job id)."""
    flushed: Signal[list[int]] = dataclasses.field(default_factory=lambda: Signal("flushed"))
    """The completer wrote a batch of outcomes (the job ids written)."""
    heartbeat: Signal[int] = dataclasses.field(default_factory=lambda: Signal("heartbeat"))
    """The lease keeper renewed leases (how many)."""
    lease_lost: Signal[int] = dataclasses.field(default_factory=lambda: Signal("lease_lost"))
    """A held lease was found taken by another worker (the job id)."""
    woke: Signal[str] = dataclasses.field(default_factory=lambda: Signal("woke"))
    """The producer was woken (the queue named, ``"*"`` for a subscription's catch-up)."""
    breaker_tripped: Signal[str] = dataclasses.field(
        default_factory=lambda: Signal("breaker_tripped")
    )
    """A breaker paused a task and the pause is written (the task name)."""
    slot_enqueued: Signal[tuple[str, datetime]] = dataclasses.field(
        default_factory=lambda: Signal("slot_enqueued")
    )
    """The scheduler enqueued a cron slot (schedule id, slot)."""
    reclaimed: Signal[list[int]] = dataclasses.field(default_factory=lambda: Signal("reclaimed"))
    """The rescuer returned expired leases to pending (the ids, possibly none)."""
    swept: Signal[list[int]] = dataclasses.field(default_factory=lambda: Signal("swept"))
    """The rescuer's workflow sweep made jobs pending: children a crash left waiting, and
    parked jobs whose wait timed out (the ids)."""
