"""Small test helpers shared by the suite: a pinned clock, waiting on a condition with a
deadline (for events in another process, which no in-process hook can signal), a free port."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

T = TypeVar("T")


class FakeClock:
    """A pinned clock the backends read instead of the database's now()."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def wait_until(condition: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    """Poll ``condition`` until it is truthy and return it; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return value


async def await_until(condition: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    """``wait_until`` for async tests: the event loop keeps running between looks."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
    return value


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
