"""The thread pool of sync jobs, grown past threads that timed-out jobs left stuck.

A sync job that runs past its timeout is recorded as timed out, but its thread cannot be
killed: it keeps running and keeps its pool thread. With a fixed pool of ``concurrency``
threads, the next sync jobs would queue behind it (issue 9, item 4: they timed out in the
queue and were recorded dead without ever starting). So when a job's thread is left stuck,
new jobs go to a fresh pool of ``concurrency`` threads while the old one finishes what it
holds and lets its threads go; at most ``MAX_STUCK_THREADS`` stuck threads are outgrown
this way, after which new sync jobs wait for a thread (their timeout counts from the moment
their code starts, so waiting never kills them).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

log = logging.getLogger("skiplock.worker")

MAX_STUCK_THREADS = 64
"""How many stuck threads a worker outgrows before new sync jobs wait for a free thread."""


class JobPool(ThreadPoolExecutor):
    """A ThreadPoolExecutor (so the worker can hold it as one) whose work goes to the newest
    of its inner pools; ``note_stuck`` replaces that pool when a timed-out job keeps a thread."""

    def __init__(self, threads: int, thread_name_prefix: str = "skiplock-job") -> None:
        super().__init__(1, thread_name_prefix)  # never used: work goes to the inner pools
        self._size = threads
        self._prefix = thread_name_prefix
        self._grow_lock = threading.Lock()
        self._stuck = 0
        self._current = ThreadPoolExecutor(threads, thread_name_prefix)
        # Only for shutdown(); old enough ones have long let their threads go.
        self._retired: collections.deque[ThreadPoolExecutor] = collections.deque(
            maxlen=MAX_STUCK_THREADS
        )

    @property
    def stuck(self) -> int:
        """Threads still running a job that already timed out."""
        return self._stuck

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return self._current.submit(fn, *args, **kwargs)

    def note_stuck(self, future: Future[Any]) -> None:
        """A timed-out job's thread is still running ``future``: outgrow it, within bounds."""
        with self._grow_lock:
            self._stuck += 1
            stuck = self._stuck
            grow = stuck <= MAX_STUCK_THREADS
            if grow:
                self._retired.append(self._current)
                self._current.shutdown(wait=False)  # its idle threads exit, the stuck one later
                self._current = ThreadPoolExecutor(self._size, self._prefix)
        future.add_done_callback(self._unstick)
        if grow:
            log.warning(
                "a timed-out sync job still holds its thread (%d stuck); new sync jobs get a "
                "fresh pool of %d threads",
                stuck,
                self._size,
            )
        else:
            log.error(
                "%d threads are stuck in timed-out sync jobs (the bound is %d); new sync jobs "
                "wait for a free thread",
                stuck,
                MAX_STUCK_THREADS,
            )

    def _unstick(self, _: Future[Any]) -> None:
        with self._grow_lock:
            self._stuck -= 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for pool in [*self._retired, self._current]:
            pool.shutdown(wait=wait, cancel_futures=cancel_futures)
        super().shutdown(wait=wait, cancel_futures=cancel_futures)
