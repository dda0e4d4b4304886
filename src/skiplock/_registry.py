"""``Registry``: what a worker needs of an app to run its jobs, and nothing else.

The tasks by name, the schedules, the tracing hooks, the clock and the result limit, plus the
two in-process shortcuts between an app's callers and the workers in the same process: the
wake-up after a local enqueue commits, and the note a worker gives the result waiters when it
writes outcomes. ``App`` fills it (``@app.task``, ``app.schedule``) and hands it on; a
``Worker`` reads it, so the worker and its services never hold the App, and this module sits
below both (it imports neither).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from ._backends.protocol import Clock
from ._config import require
from ._cron import zone
from ._job import NewJob
from ._job_log import DEFAULT_JOB_LOG_BYTES, MAX_JOB_LOG_BYTES, MIN_JOB_LOG_BYTES, LogBuffer
from ._limits import check_int
from ._payload import DEFAULT_MAX_RESULT_BYTES
from ._schedule import Schedule
from ._task import Task
from ._tracing import Tracing
from .errors import ConfigurationError, UnknownTask

log = logging.getLogger("skiplock.scheduler")

Waker = Callable[[str], None]
"""Told the queue a job of this process was enqueued on (``"*"``: any queue)."""

FinishedListener = Callable[[Iterable[int]], None]
"""Told the ids of jobs whose final outcomes a worker of this process just wrote."""

SlotListener = Callable[[Schedule, datetime, int, NewJob], None]
"""Told each cron slot a scheduler of this process enqueued: the schedule, the slot, the job's
id and the job as written. Called on the scheduler's loop: it must not block."""


class Registry:
    """Tasks, schedules, tracing, clock and result limit of one app; the in-process hints.

    (The payload limit stays on the App: enqueue checks it, a worker never does.)"""

    def __init__(
        self,
        *,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        clock: Clock | None = None,
        timezone: str = "UTC",
        job_log: bool = False,
        job_log_bytes: int = DEFAULT_JOB_LOG_BYTES,
    ) -> None:
        require(max_result_bytes > 0, "max_result_bytes", max_result_bytes, "must be > 0")
        require(isinstance(job_log, bool), "job_log", job_log, "must be True or False")
        check_int("job_log_bytes", job_log_bytes, MIN_JOB_LOG_BYTES, MAX_JOB_LOG_BYTES)
        self.max_result_bytes = max_result_bytes
        self.job_log = job_log
        """Whether a task that says nothing of ``job_log`` keeps its jobs' logs."""
        self.job_log_bytes = job_log_bytes
        """The bytes of log an attempt keeps when its task names none."""
        self.clock = clock
        """Replaces the database's now() (tests that pin time); None: the real clock."""
        self.timezone = zone(timezone).key
        """The default zone of schedules that name none."""
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.schedules: dict[str, Schedule] = {}
        self.tracing: Tracing | None = None
        """Span hooks (``skiplock.otel.instrument(app)``); None: untraced, free."""
        self._wakers: set[Waker] = set()
        self._finished: list[FinishedListener] = []
        self._slot_listeners: list[SlotListener] = []

    def job_log_of(self, task: Task[Any, Any] | None) -> int | None:
        """The bytes of log an attempt of ``task`` keeps (None: it keeps none): its own
        ``job_log``/``job_log_bytes``, or this app's."""
        if task is None:
            return None
        keeps = self.job_log if task.job_log is None else task.job_log
        if not keeps:
            return None
        return self.job_log_bytes if task.job_log_bytes is None else task.job_log_bytes

    def log_buffer(self, task_name: str) -> LogBuffer | None:
        """A new buffer for an attempt of the task named so (None: it keeps no log)."""
        cap = self.job_log_of(self.tasks.get(task_name))
        return None if cap is None else LogBuffer(cap)

    def add_task(self, task: Task[Any, Any]) -> None:
        if task.name in self.tasks:
            raise ValueError(f"name={task.name!r}: a task is already registered as this")
        self.tasks[task.name] = task

    def add_schedule(self, schedule: Schedule) -> None:
        if schedule.id in self.schedules:
            raise ConfigurationError(
                f"name={schedule.id!r}: a schedule already has this name; pass name= to tell "
                "two schedules of one task apart"
            )
        self.schedules[schedule.id] = schedule

    def get_task(self, name: str) -> Task[Any, Any]:
        try:
            return self.tasks[name]
        except KeyError:
            raise UnknownTask(f"no task is registered as {name!r}") from None

    # -- in-process wake-ups: enqueuers -> workers ---------------------------------------------

    def add_waker(self, waker: Waker) -> Callable[[], None]:
        """Call ``waker(queue)`` after this process commits an enqueue of its own; returns
        the unsubscribe."""
        self._wakers.add(waker)
        return lambda: self._wakers.discard(waker)

    def wake_queues(self, queues: Iterable[str]) -> None:
        for queue in queues:
            for waker in list(self._wakers):
                waker(queue)

    # -- in-process results: workers -> waiters ------------------------------------------------

    def on_finished(self, listener: FinishedListener) -> None:
        """Call ``listener(job_ids)`` whenever a worker here writes final outcomes."""
        self._finished.append(listener)

    # -- in-process slots: schedulers -> integrations ------------------------------------------

    def on_slot_enqueued(self, listener: SlotListener) -> None:
        """Call ``listener`` for each cron slot a scheduler here enqueues (Django sends
        ``task_enqueued`` for a ``@periodic`` slot, as for any enqueue)."""
        self._slot_listeners.append(listener)

    def note_slot_enqueued(
        self, schedule: Schedule, slot: datetime, job_id: int, job: NewJob
    ) -> None:
        """A scheduler enqueued ``slot`` as ``job_id``: tell the listeners (one that raises is
        logged; the slot stays enqueued and the scheduler goes on)."""
        for listener in self._slot_listeners:
            try:
                listener(schedule, slot, job_id, job)
            except Exception:
                log.exception("a listener of schedule %s's enqueued slots raised", schedule.id)

    def note_finished(self, job_ids: Iterable[int]) -> None:
        """A worker on this loop wrote these jobs' final outcomes: tell the listeners."""
        ids = list(job_ids)
        for listener in self._finished:
            listener(ids)
