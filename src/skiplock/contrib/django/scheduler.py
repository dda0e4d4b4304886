"""Sweeping the ``@periodic`` tasks from Django: django-tasks-concurrent's scheduler API on
skiplock's slot ledger, for every backend a skiplock worker serves.

``defer_periodic_tasks(now=None)`` is one sweep, as the seed's: for each schedule, its current
slot (the most recent at or before ``now``) is claimed and enqueued, through the task's own
backend, unless it is older than ``PERIODIC_MAX_DELAY_SECONDS`` or someone (another process,
the worker's own scheduler) already claimed it. The claim and the enqueue share one Django
transaction (``_ledger.py``), so a failed enqueue gives the slot back. A schedule whose
enqueue fails is logged with its error and retried (1 s, doubling to 30 s, while its slot is
still due); the others go on.

``run_scheduler_thread`` and ``defer_periodic_forever`` (the loop a django-tasks-db worker
runs beside its tasks) sleep until the next real slot plus ``TICK_MARGIN_SECONDS``: their
``interval`` is only the ceiling of one sleep.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from ..._backends.params import CronSlotsPruneSyncParams, CronSlotSyncParams
from ...errors import SchemaError
from ._ledger import ledger_for
from .periodic_tasks import (
    DEFAULT_MAX_DELAY_S,
    PeriodicTask,
    max_delay_seconds,
    registered_periodic_tasks,
)

log = logging.getLogger("skiplock.contrib.django")

DEFAULT_MAX_DELAY_SECONDS = int(DEFAULT_MAX_DELAY_S)
DEFER_RETENTION_DAYS = 7
"""Ledger rows are kept at least this long (and at least the max delay)."""
TICK_MARGIN_SECONDS = 0.5
"""How long after a slot's boundary a sweep wakes (the seed's margin)."""
RETRY_FIRST_S = 1.0
RETRY_CAP_S = 30.0

__all__ = [
    "DEFAULT_MAX_DELAY_SECONDS",
    "DEFER_RETENTION_DAYS",
    "TICK_MARGIN_SECONDS",
    "defer_one",
    "defer_periodic_forever",
    "defer_periodic_tasks",
    "max_delay_seconds",
    "prune_periodic_defers",
    "run_scheduler_thread",
    "seconds_until_next_slot",
]


def _now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def _entries(backend_alias: str | None) -> list[PeriodicTask]:
    return [
        e
        for e in registered_periodic_tasks()
        if backend_alias is None or e.backend_alias == backend_alias
    ]


def _job_id(result: Any) -> int | None:
    """The skiplock job a slot enqueued, for the ledger row (None: not a skiplock job)."""
    text = str(getattr(result, "id", ""))
    return int(text) if text.isdigit() else None


def defer_one(entry: PeriodicTask, now: datetime, cutoff: datetime) -> bool:
    """Claim ``entry``'s current slot and enqueue it, in one transaction; True if this call
    fired it. A stale slot (before ``cutoff``) or one already claimed fires nothing; an
    enqueue that raises rolls its claim back and the error propagates."""
    from django.db import connections, transaction

    slot = entry.current_slot(now)
    if slot is None or slot < cutoff:
        log.debug("Skipping stale slot %s of %s", slot, entry.title)
        return False
    task = entry.bound_task
    ledger = ledger_for(task.get_backend())
    with transaction.atomic(using=ledger.database):
        conn = connections[ledger.database]
        conn.ensure_connection()
        fired = ledger.backend.cron_slot_claim_sync(
            CronSlotSyncParams(
                entry.schedule_id,
                slot,
                conn.connection,
                lambda: _job_id(task.enqueue(**entry.slot_kwargs(slot))),
            )
        )
    if fired:
        log.info("Deferred periodic task %s for slot %s", entry.title, slot.isoformat())
    return fired


class _Sweeper:
    """Sweeps with a memory of failures: a schedule whose enqueue failed is retried after
    1 s, doubling to 30 s, and counted as due for the sleep computation."""

    def __init__(self, backend_alias: str | None) -> None:
        self.backend_alias = backend_alias
        self._failures: dict[tuple[str, str], int] = {}
        self._retry_at: dict[tuple[str, str], datetime] = {}

    def sweep(self, now: datetime | None = None) -> int:
        now = _now(now)
        cutoff = now - timedelta(seconds=max_delay_seconds())
        fired = 0
        for entry in _entries(self.backend_alias):
            retry = self._retry_at.get(entry.key)
            if retry is not None and now < retry:
                continue
            try:
                fired += defer_one(entry, now, cutoff)
            except Exception:
                failures = self._failures[entry.key] = self._failures.get(entry.key, 0) + 1
                delay = min(RETRY_FIRST_S * 2 ** (failures - 1), RETRY_CAP_S)
                self._retry_at[entry.key] = now + timedelta(seconds=delay)
                log.exception(
                    "Periodic task %s could not be deferred; retrying in %.0fs", entry.title, delay
                )
            else:
                self._failures.pop(entry.key, None)
                self._retry_at.pop(entry.key, None)
        if fired:
            prune_periodic_defers(now, self.backend_alias)
        log.debug("periodic sweep fired %d", fired)
        return fired

    def sleep_s(self, max_sleep: float, now: datetime | None = None) -> float:
        now = _now(now)
        sleep = seconds_until_next_slot(now, max_sleep, self.backend_alias)
        for retry in self._retry_at.values():
            sleep = min(sleep, max(0.0, (retry - now).total_seconds()))
        return sleep


def defer_periodic_tasks(now: datetime | None = None, *, backend_alias: str | None = None) -> int:
    """One sweep of every ``@periodic`` schedule (or of one backend's): enqueue each current
    slot that is due and unclaimed; return how many fired. A schedule that fails is logged
    and does not stop the others."""
    if now is not None and not isinstance(now, datetime):
        raise TypeError(
            f"defer_periodic_tasks(now=...): a datetime or None (got {now!r}; "
            "pass backend_alias= to sweep one backend)"
        )
    return _Sweeper(backend_alias).sweep(now)


def prune_periodic_defers(now: datetime | None = None, backend_alias: str | None = None) -> int:
    """Forget ledger rows older than ``DEFER_RETENTION_DAYS`` (or the max delay, if longer:
    a row pruned while its slot could still fire would let it fire twice)."""
    from django.db import connections

    now = _now(now)
    keep = max(timedelta(days=DEFER_RETENTION_DAYS), timedelta(seconds=max_delay_seconds()))
    removed, seen = 0, set()
    for entry in _entries(backend_alias):
        ledger = ledger_for(entry.bound_task.get_backend())
        if (ledger.database, id(ledger.backend)) in seen:
            continue
        seen.add((ledger.database, id(ledger.backend)))
        conn = connections[ledger.database]
        conn.ensure_connection()
        prune = CronSlotsPruneSyncParams(conn.connection, now - keep)
        removed += ledger.backend.cron_slots_prune_sync(prune)
    return removed


def seconds_until_next_slot(
    now: datetime | None = None, max_sleep: float = 15.0, backend_alias: str | None = None
) -> float:
    """Seconds until the earliest next slot of any schedule plus ``TICK_MARGIN_SECONDS``,
    within ``[0, max_sleep]`` (``max_sleep`` with no schedules)."""
    now = _now(now)
    entries: Sequence[PeriodicTask] = _entries(backend_alias)
    if not entries:
        return max_sleep
    soonest = min((e.next_slot(now) - now).total_seconds() for e in entries)
    return max(0.0, min(soonest + TICK_MARGIN_SECONDS, max_sleep))


def _check_interval(interval: float) -> None:
    if not isinstance(interval, int | float) or not 0 < interval < float("inf"):
        raise ValueError(f"interval must be a positive number of seconds (got {interval!r})")


def _close_connections() -> None:
    from django.db import close_old_connections

    close_old_connections()


def _sweep_and_sleep_s(sweeper: _Sweeper, interval: float) -> float:
    """One sweep (a failing one is logged) and the sleep until the next; on the caller's
    thread, whose connections are recycled afterwards."""
    try:
        sweeper.sweep()
    except Exception:
        log.exception("Scheduler poll failed")
    finally:
        _close_connections()
    return sweeper.sleep_s(interval)


async def _check_ledgers(backend_alias: str | None) -> None:
    """``SchemaError`` naming ``manage.py migrate`` if a schedule's slot ledger is not
    migrated: every slot would fail (a traceback each, forever) while its worker looked
    healthy. Checked once, where the loop starts, on a connection of its own."""
    from ..._app import App

    ledgers: dict[str, str] = {}
    for entry in _entries(backend_alias):
        ledger = ledger_for(entry.bound_task.get_backend())
        ledgers.setdefault(ledger.url, ledger.database)
    for url, database in ledgers.items():
        app = App(url)
        try:
            current, latest = await (await app.backend()).schema_version()
        except Exception as exc:  # a database down at startup: the sweeps retry, as ever
            log.warning("could not check the @periodic ledger on %r: %s", database, exc)
            continue
        finally:
            await app.close()
        if current < latest:
            raise SchemaError(
                f"@periodic: skiplock's slot ledger on database {database!r} is not migrated "
                f"(schema version {current}, this skiplock needs {latest}): run "
                "`python manage.py migrate`"
            )


async def defer_periodic_forever(interval: float = 15.0, backend_alias: str | None = None) -> None:
    """Sweep until cancelled, sleeping until the next slot (``interval``: the ceiling of one
    sleep). The sweeps run on one thread of their own (one Django connection, recycled as
    Django's ``CONN_MAX_AGE`` says), never on the event loop or a task's thread. An
    unmigrated ledger is an error at once (``SchemaError``), not a failure every slot."""
    _check_interval(interval)
    await _check_ledgers(backend_alias)
    sweeper = _Sweeper(backend_alias)
    log.info("Starting scheduler interval=%s schedules=%d", interval, len(_entries(backend_alias)))
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(1, thread_name_prefix="periodic-scheduler") as thread:
        try:
            while True:
                sleep = await loop.run_in_executor(thread, _sweep_and_sleep_s, sweeper, interval)
                await asyncio.sleep(sleep)
        finally:
            await asyncio.shield(loop.run_in_executor(thread, _close_all))


def _close_all() -> None:
    from django.db import connections

    connections.close_all()


def run_scheduler_thread(
    interval: float = 15.0, backend_alias: str | None = None
) -> threading.Event:
    """Sweep on a daemon thread named ``periodic-scheduler``, sleeping until the next slot
    (at most ``interval`` at a time), until the returned event is set."""
    _check_interval(interval)
    stop = threading.Event()
    sweeper = _Sweeper(backend_alias)

    def loop() -> None:
        while not stop.is_set():
            stop.wait(_sweep_and_sleep_s(sweeper, interval))

    threading.Thread(target=loop, name="periodic-scheduler", daemon=True).start()
    return stop
