"""``defer_periodic_tasks``: one sweep of skiplock's scheduler over the ``@periodic`` tasks, for
projects that drive scheduling themselves (a cron job, a management command, a test).

Each backend keeps one ``Scheduler`` per process, so the sweep remembers the last slot it saw;
the database ledger still makes every slot enqueue once across processes.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any

from ..._job import SlotOutcome
from ..._scheduler import Scheduler
from .periodic_tasks import attach_periodic_tasks

_SCHEDULERS: dict[int, Scheduler] = {}
log = logging.getLogger("skiplock.contrib.django")


async def _sweep(app: Any) -> int:
    scheduler = _SCHEDULERS.get(id(app))
    if scheduler is None:
        scheduler = _SCHEDULERS[id(app)] = Scheduler(app, await app.backend())
    results = await scheduler.tick(datetime.now(UTC))
    return sum(1 for _, _, outcome in results if outcome == SlotOutcome.ENQUEUED)


def defer_periodic_tasks(backend_alias: str = "default") -> int:
    """Enqueue every periodic slot due since the last sweep; return how many this call fired."""
    from django.tasks import task_backends

    backend = task_backends[backend_alias]
    attach_periodic_tasks(backend)
    app = backend.app
    return int(app.run_sync(_sweep(app)))


def run_scheduler_thread(interval: float = 15.0, backend_alias: str = "default") -> threading.Event:
    """Sweep every ``interval`` seconds on a daemon thread until the returned event is set."""
    if not interval > 0:
        raise ValueError(f"interval must be a positive number of seconds (got {interval!r})")
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                defer_periodic_tasks(backend_alias)
            except Exception:
                log.warning("periodic sweep failed; retrying in %ss", interval, exc_info=True)
            stop.wait(interval)

    threading.Thread(target=loop, name="skiplock-django-scheduler", daemon=True).start()
    return stop
