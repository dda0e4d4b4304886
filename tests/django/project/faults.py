"""Faults a test injects into a worker process it spawns (``SKIPLOCK_DJANGO_FAULTS``), to see
what the worker does when a part of it dies. Never used outside the tests."""

from __future__ import annotations

from typing import Any


def install(names: str) -> None:
    for name in names.split(","):
        FAULTS[name]()


def _scheduler_dies() -> None:
    """The scheduler's second round raises: the worker must stop and exit non-zero."""
    from skiplock._worker.scheduler import Scheduler

    original = Scheduler.tick
    calls = {"n": 0}

    async def tick(self: Any, now: Any) -> Any:
        calls["n"] += 1
        if calls["n"] >= 2:
            raise RuntimeError("injected fault: the scheduler died")
        return await original(self, now)

    Scheduler.tick = tick  # type: ignore[method-assign]


def _slot_enqueue_fails() -> None:
    """The per-second tick's first two slots cannot be built (a non-transient error of that
    one schedule): the worker must log it, retry that schedule and keep running."""
    from skiplock._schedule import Schedule

    original = Schedule.job_for
    calls = {"n": 0}

    def job_for(self: Any, slot: Any) -> Any:
        if self.id == "tick-every-second" and slot.year > 2000 and calls["n"] < 2:
            calls["n"] += 1
            raise ValueError("injected fault: this slot's job cannot be built")
        return original(self, slot)

    Schedule.job_for = job_for  # type: ignore[method-assign]


FAULTS = {"scheduler-dies": _scheduler_dies, "slot-enqueue-fails": _slot_enqueue_fails}
