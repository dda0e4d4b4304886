"""Values from worker threads back to the event loop, many per wake-up.

Every value a thread hands the loop through ``call_soon_threadsafe`` wakes the loop with a
write to its self-pipe and a pass of the loop to read it; ``asyncio.wrap_future`` and
``run_in_executor`` add a Future with its own condition variable on top. At thousands of
short sync jobs or SQLite statements a second these hops, not the work, were the cost
(Django's no-op drain on SQLite ran at half the rate of the same jobs written async). Here a
thread appends its outcome to an inbox and wakes the loop only when the inbox was empty; one
pass of the loop then settles every outcome that arrived meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Any


class Handback:
    """One loop's inbox: ``post``/``fail`` from any thread, settled on the loop in batches."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._items: list[tuple[asyncio.Future[Any] | None, Any, Any]] = []
        """(future, value, error) to settle; (None, function, argument) to call."""

    def post(self, future: asyncio.Future[Any], value: Any) -> None:
        """Settle ``future`` (of this loop) with ``value``, soon; safe from any thread."""
        self._add((future, value, None))

    def fail(self, future: asyncio.Future[Any], error: BaseException) -> None:
        """Settle ``future`` with ``error`` raised, soon; safe from any thread."""
        self._add((future, None, error))

    def call(self, fn: Callable[[Any], None], argument: Any) -> None:
        """Call ``fn(argument)`` on the loop, soon; safe from any thread. For a caller that
        needs no Future (a sync job's attempt hands its outcome straight to the runner: the
        Future's callbacks would cost the loop one more pass). ``fn`` must not raise: what it
        raises is reported to the loop's exception handler, and the rest are still settled."""
        self._add((None, fn, argument))

    def _add(self, item: tuple[asyncio.Future[Any] | None, Any, Any]) -> None:
        with self._lock:
            first = not self._items
            self._items.append(item)
        if first:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
                self._loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        with self._lock:
            items, self._items = self._items, []
        for future, value, error in items:
            if future is None:  # a call: value is the function, error its argument
                try:
                    value(error)
                except Exception as exc:  # a bug in fn: the rest still settle
                    self._loop.call_exception_handler(
                        {"message": "a handback call raised", "exception": exc}
                    )
                continue
            if future.done():  # a waiter cancelled (shutdown, timeout) has gone
                continue
            if error is None:
                future.set_result(value)
            else:
                future.set_exception(error)


_INBOXES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Handback] = (
    weakref.WeakKeyDictionary()
)


def handback_for(loop: asyncio.AbstractEventLoop) -> Handback:
    """The inbox of ``loop`` (one per loop, made on first use, gone with the loop)."""
    inbox = _INBOXES.get(loop)
    if inbox is None:
        inbox = _INBOXES[loop] = Handback(loop)
    return inbox
