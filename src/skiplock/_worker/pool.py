"""The threads of sync jobs: a plain queue in front of ``concurrency`` threads, grown past
threads that timed-out jobs left stuck.

Why not ``concurrent.futures.ThreadPoolExecutor``: each call through it builds a Future with
its own condition variable, takes two locks and settles the Future under a third, ~25 µs of
a no-op's round trip against ~6 µs for a call through a ``SimpleQueue`` (measured here, ten
threads). At thousands of short sync jobs a second, all of it on threads that share the GIL
with the event loop, that was a fifth of a drain. The job's outcome travels back through the
loop's inbox (``handback.py``), so nothing here needs a Future.

A sync job that runs past its timeout is recorded as timed out, but its thread cannot be
killed: it keeps running and keeps its thread. With a fixed set of ``concurrency`` threads,
the next sync jobs would queue behind it (issue 9, item 4: they timed out in the queue and
were recorded dead without ever starting). So each stuck job lets the pool start one more
thread, up to ``MAX_STUCK_THREADS``; past that, new sync jobs wait for a free thread (their
timeout counts from the moment their code starts, so waiting never kills them). A thread
whose stuck job finally returns retires if the pool has more threads than it now needs.

The threads are daemon threads: a job stuck past the worker's shutdown deadline (its row
already released to pending) does not hold the process open.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeAlias

log = logging.getLogger("skiplock.worker")

MAX_STUCK_THREADS = 64
"""How many stuck threads a worker outgrows before new sync jobs wait for a free thread."""

SyncPool: TypeAlias = "JobPool | ThreadPoolExecutor"
"""Where sync functions run: the worker's JobPool, or any executor (tests, embedding code)."""

_QUEUED, _RUNNING, _DONE, _CANCELLED = range(4)


class Work:
    """One call handed to a ``JobPool``: queued, running, then done; or cancelled unstarted."""

    __slots__ = ("_args", "_fn", "_pool", "_state", "_stuck")

    def __init__(self, pool: JobPool, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self._pool = pool
        self._fn = fn
        self._args = args
        self._state = _QUEUED
        self._stuck = False

    def running(self) -> bool:
        """Its thread is in the call now."""
        return self._state == _RUNNING

    def done(self) -> bool:
        """The call returned (or it was cancelled before it started)."""
        return self._state in (_DONE, _CANCELLED)

    def cancel(self) -> bool:
        """Never start it, if it has not started; True when it never will."""
        with self._pool._lock:
            if self._state == _QUEUED:
                self._state = _CANCELLED
            return self._state == _CANCELLED


class JobPool:
    """``submit(fn, *args)`` runs ``fn`` on one of ``threads`` threads (started on demand);
    ``note_stuck`` lets one more thread start past a job its timeout gave up on."""

    def __init__(self, threads: int, thread_name_prefix: str = "skiplock-job") -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1 (got {threads})")
        self._size = threads
        self._prefix = thread_name_prefix
        self._queue: queue.SimpleQueue[Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._alive = 0
        self._idle = 0
        self._stuck = 0
        self._started = 0
        self._closed = False

    @property
    def stuck(self) -> int:
        """Threads still running a job that already timed out."""
        return self._stuck

    def _limit(self) -> int:
        return self._size + min(self._stuck, MAX_STUCK_THREADS)

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Work:
        """Queue ``fn(*args)`` for a thread; what it raises is logged (callers catch their own)."""
        work = Work(self, fn, args)
        with self._lock:
            if self._closed:
                raise RuntimeError("the job pool is shut down")
            if self._idle:
                self._idle -= 1  # a waiting thread takes it
            elif self._alive < self._limit():
                self._start_thread()
            self._queue.put(work)
        return work

    def _start_thread(self) -> None:  # with self._lock held
        self._alive += 1
        self._started += 1
        thread = threading.Thread(
            target=self._serve, name=f"{self._prefix}_{self._started}", daemon=True
        )
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)
        thread.start()

    def _serve(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                return
            with self._lock:
                run = work._state == _QUEUED
                if run:
                    work._state = _RUNNING
            if run:
                try:
                    work._fn(*work._args)
                except BaseException:  # callers hand back their own outcome; this is a bug
                    log.exception("a sync job's thread raised")
                with self._lock:
                    work._state = _DONE
                    if work._stuck:
                        work._stuck = False
                        self._stuck -= 1
                    if self._alive > self._limit():  # outgrown: this thread is not needed
                        self._alive -= 1
                        return
                    self._idle += 1
            else:
                with self._lock:
                    self._idle += 1

    def note_stuck(self, work: Work) -> None:
        """A timed-out job's thread is still running ``work``: outgrow it, within bounds."""
        with self._lock:
            if work._state != _RUNNING or work._stuck:
                return  # it returned meanwhile, or was counted already
            work._stuck = True
            self._stuck += 1
            stuck = self._stuck
            grow = stuck <= MAX_STUCK_THREADS
            if grow and self._idle == 0 and self._queue.qsize() > 0:
                self._start_thread()  # a job already waits: it need not wait for the next
        if grow:
            log.warning(
                "a timed-out sync job still holds its thread (%d stuck); new sync jobs get a "
                "fresh thread (%d threads at most now)",
                stuck,
                self._size + stuck,
            )
        else:
            log.error(
                "%d threads are stuck in timed-out sync jobs (the bound is %d); new sync jobs "
                "wait for a free thread",
                stuck,
                MAX_STUCK_THREADS,
            )

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Start nothing new; with ``cancel_futures``, drop what is queued; with ``wait``,
        join the threads (a stuck one included)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    work = self._queue.get_nowait()
                except queue.Empty:
                    break
                if work is not None:
                    work.cancel()
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()
