"""Surviving a database that blinks: capped exponential backoff and ``install_resilient_run``.

django-tasks-db's ``db_worker`` lets every database error but SQLite's "database is locked"
escape its poll loop, so a dropped connection (a restarted server, an idle reaper) ends the
process. ``install_resilient_run()`` wraps that loop (``Worker.run``): an error closes the
thread's connections (the next query opens a fresh one), waits 1 s, 2 s, 4 s ... at most 30 s,
and re-enters the loop. Unlike the seed's wrapper, the delay starts again from 1 s once a task
has run after the error (or the loop kept going for the longest delay), so a blip next week
does not wait 30 s because of last week's. An error that races a shutdown (the worker was
already told to stop) is raised, never retried over. skiplock's own workers (both backends
served by ``concurrent_worker``) recover the same way without being patched.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("skiplock.contrib.django")

RECONNECT_MAX_BACKOFF_SECONDS = 30.0
_MARK = "_skiplock_resilient"


@dataclass
class ReconnectBackoff:
    """Delays after failures in a row: ``first_s`` doubled each time, at most ``cap_s``;
    ``succeeded()`` starts the sequence again."""

    first_s: float = 1.0
    cap_s: float = RECONNECT_MAX_BACKOFF_SECONDS
    failures: int = 0

    def __post_init__(self) -> None:
        if not (0 < self.first_s <= self.cap_s):
            raise ValueError(
                f"backoff: need 0 < first_s <= cap_s (got {self.first_s!r}, {self.cap_s!r})"
            )

    def next_delay(self) -> float:
        self.failures += 1
        return float(min(self.cap_s, self.first_s * 2 ** min(self.failures - 1, 32)))

    def succeeded(self) -> None:
        self.failures = 0


def _close_connections() -> None:
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        try:
            conn.close()
        except Exception:  # a dead socket may refuse even to close; it is dropped anyway
            log.debug("closing a dead connection failed", exc_info=True)


def install_resilient_run(
    max_backoff_seconds: float = RECONNECT_MAX_BACKOFF_SECONDS,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Make django-tasks-db's ``db_worker`` survive dropped connections (see the module doc).

    Idempotent: a second call changes nothing and returns False; True when it patched.
    """
    if not (isinstance(max_backoff_seconds, int | float) and max_backoff_seconds >= 1):
        raise ValueError(f"max_backoff_seconds must be >= 1 (got {max_backoff_seconds!r})")
    try:
        from django_tasks_db.management.commands.db_worker import Worker
    except ImportError as exc:
        raise ImportError(
            "install_resilient_run patches django-tasks-db's worker: "
            "pip install 'skiplock[django-tasks-db]'"
        ) from exc
    with _LOCK:
        if getattr(Worker.run, _MARK, False):
            return False
        Worker.run = _resilient_run(Worker.run, max_backoff_seconds, sleep)
        Worker.run_task = _marking_success(Worker.run_task)
        return True


_LOCK = threading.Lock()


def _backoff_of(worker: Any, cap: float) -> ReconnectBackoff:
    backoff = getattr(worker, "_skiplock_backoff", None)
    if backoff is None:
        backoff = ReconnectBackoff(cap_s=cap)
        worker._skiplock_backoff = backoff
    return backoff


def _resilient_run(
    run: Callable[[Any], None], cap: float, sleep: Callable[[float], None]
) -> Callable[[Any], None]:
    def resilient_run(self: Any) -> None:
        backoff = _backoff_of(self, cap)
        while True:
            entered = time.monotonic()
            try:
                return run(self)
            except Exception as exc:
                if not getattr(self, "running", True):
                    raise  # a shutdown raced the error: do not retry over it
                if time.monotonic() - entered >= cap:
                    backoff.succeeded()  # it kept going long enough: this is a new blip
                delay = backoff.next_delay()
                log.warning(
                    "worker poll loop failed (%s: %s); reconnecting in %.0fs",
                    type(exc).__name__,
                    exc,
                    delay,
                )
                _close_connections()
                sleep(delay)
                if not getattr(self, "running", True):
                    return

    setattr(resilient_run, _MARK, True)
    return resilient_run


def _marking_success(run_task: Callable[..., None]) -> Callable[..., None]:
    def run_task_then_reset(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            return run_task(self, *args, **kwargs)
        finally:
            _backoff_of(self, RECONNECT_MAX_BACKOFF_SECONDS).succeeded()

    return run_task_then_reset
