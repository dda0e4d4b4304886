"""Values from the sync-job threads back to the event loop, many per wake-up.

Every value a pool thread hands the loop through ``call_soon_threadsafe`` wakes the loop with
a write to its self-pipe and a pass of the loop to read it. With ``asyncio.wrap_future`` that is
one wake-up per finished sync job, plus one more when the job's code starts: at thousands of
short sync jobs a second these hops, not the jobs, were the cost (Django's no-op drain on
SQLite ran at half the rate of the same jobs written async). Here a thread appends its value to
an inbox and wakes the loop only when the inbox was empty; one pass of the loop then settles
every value that arrived meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from typing import Any


class Handback:
    """One loop's inbox: ``post`` from any thread, settled on the loop in batches."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._items: list[tuple[asyncio.Future[Any], Any]] = []

    def post(self, future: asyncio.Future[Any], value: Any) -> None:
        """Settle ``future`` (of this loop) with ``value``, soon; safe from any thread."""
        with self._lock:
            first = not self._items
            self._items.append((future, value))
        if first:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
                self._loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        with self._lock:
            items, self._items = self._items, []
        for future, value in items:
            if not future.done():  # a waiter cancelled (shutdown, timeout) has gone
                future.set_result(value)


_INBOXES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Handback] = (
    weakref.WeakKeyDictionary()
)


def handback_for(loop: asyncio.AbstractEventLoop) -> Handback:
    """The inbox of ``loop`` (one per loop, made on first use, gone with the loop)."""
    inbox = _INBOXES.get(loop)
    if inbox is None:
        inbox = _INBOXES[loop] = Handback(loop)
    return inbox
