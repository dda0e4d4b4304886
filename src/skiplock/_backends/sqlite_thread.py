"""The SQLite backend's one database thread: its calls queued, their outcomes handed back.

SQLite's calls block, so they run off the event loop on one thread that owns the connection
(one writer per process; statements in turn, as the file takes them anyway). It used to be
a ``ThreadPoolExecutor(1)``: each call then built a concurrent Future and an asyncio Future
chained to it, with a loop wake-up per call, ~25 µs of bookkeeping around an INSERT whose
commit takes ~30 µs at ``synchronous=normal``. Here a call is a tuple on a ``SimpleQueue``
and its outcome goes back through the loop's inbox (``_handback``).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .._handback import Handback, handback_for

T = TypeVar("T")

_Call = tuple[Callable[[], Any], asyncio.Future[Any], Handback]


class DatabaseThread:
    """``await thread.call(fn)`` runs ``fn()`` on the thread; calls run in the order made."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        # A daemon: a script that never closes its app must still exit (what it awaited is
        # done; SQLite's file is consistent at every instant).
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """``fn()`` on the thread, as a future of this loop. Cancelled before the thread
        reaches it, it never runs; once begun, it runs to its end (its outcome dropped)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((fn, future, handback_for(loop)))
        return future

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            fn, future, inbox = item
            if future.cancelled():  # its waiter has gone (a read of one attribute)
                continue
            try:
                value = fn()
            except BaseException as exc:  # the caller's to handle, on the loop
                inbox.fail(future, exc)
            else:
                inbox.post(future, value)

    def shutdown(self) -> None:
        """Run what is queued, then end the thread and wait for it."""
        self._queue.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join()
