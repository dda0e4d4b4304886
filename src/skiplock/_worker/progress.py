"""Progress a running job reports, held until the lease keeper's next beat writes it.

``set_progress`` costs a dict assignment: no round trip per call. The lease keeper writes the
latest record of each job with its heartbeat (the same statement), and while any is waiting it
beats at least every ``PROGRESS_INTERVAL_S``, so a job's progress reaches the table at most
once a second and at most a second late. A sync job reports from its thread: the board takes
a lock, and the keeper is woken on its loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Collection

from .._job import progress_record as progress_record  # re-exported: it lives with JobContext

PROGRESS_INTERVAL_S = 1.0


class ProgressBoard:
    """The latest unwritten progress record of each running job."""

    def __init__(self) -> None:
        self._latest: dict[int, str] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_new: Callable[[], None] | None = None

    def subscribe(self, on_new: Callable[[], None]) -> None:
        """Call ``on_new`` (on this loop) when a record arrives and none was waiting."""
        self._loop = asyncio.get_running_loop()
        self._on_new = on_new

    def put(self, job_id: int, record: str) -> None:
        with self._lock:
            first = not self._latest
            self._latest[job_id] = record
        if first and self._on_new is not None and self._loop is not None:
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is self._loop:
                self._on_new()
            else:
                self._loop.call_soon_threadsafe(self._on_new)

    def pop(self, job_id: int) -> str | None:
        """The job's unwritten record, for its outcome to write (it ended before a beat)."""
        if not self._latest:
            return None  # the common case, without the lock
        with self._lock:
            return self._latest.pop(job_id, None)

    @property
    def waiting(self) -> bool:
        return bool(self._latest)

    def take(self, held: Collection[int]) -> dict[int, str]:
        """The records of jobs still held, removed from the board (others are dropped)."""
        with self._lock:
            latest, self._latest = self._latest, {}
        return {job_id: r for job_id, r in latest.items() if job_id in held}
