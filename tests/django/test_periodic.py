"""``@periodic`` on skiplock's cron engine: the same task object back, ``timestamp`` passed,
and two workers (two schedulers) giving exactly one run per slot."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest

from skiplock.contrib.django import periodic, registered_periodic_tasks
from skiplock.contrib.django.worker import run_worker_async

from .project.demo import tasks


def test_periodic_returns_the_task_and_registers_it() -> None:
    spec = {p.periodic_id: p for p in registered_periodic_tasks()}["tick-every-second"]
    assert spec.task is tasks.tick
    assert spec.cron == "* * * * * *"


def test_periodic_rejects_a_bad_cron_and_a_non_task() -> None:
    with pytest.raises(Exception, match="field"):
        periodic("not a cron")
    with pytest.raises(TypeError, match="above @task"):
        periodic("* * * * *")(lambda: None)


def test_two_workers_run_each_slot_once() -> None:
    tasks.TICKS.clear()

    async def main() -> None:
        options = {"concurrency": 2, "interval": 0.05, "shutdown_timeout": 5.0}
        workers = [asyncio.create_task(run_worker_async(**options)) for _ in range(2)]
        while len(set(tasks.TICKS)) < 3:
            await asyncio.sleep(0.05)  # the ticks themselves are the event awaited
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(asyncio.gather(*workers), 10)

    asyncio.run(asyncio.wait_for(main(), 20))
    assert len(tasks.TICKS) == len(set(tasks.TICKS)), sorted(tasks.TICKS)


def test_defer_periodic_tasks_fires_each_slot_once() -> None:
    from skiplock.contrib.django import defer_periodic_tasks

    defer_periodic_tasks()  # primes this process's sweep (slots before now are history)
    started = time.time()
    while time.time() < int(started) + 1.2:
        time.sleep(0.05)  # a per-second schedule needs a second to pass: the clock is the event
    assert defer_periodic_tasks() >= 1
    assert defer_periodic_tasks() == 0 or time.time() >= int(started) + 2


def test_run_scheduler_thread_enqueues_until_stopped(run_worker: Any) -> None:
    from skiplock.contrib.django import run_scheduler_thread

    with pytest.raises(ValueError, match="interval must be a positive"):
        run_scheduler_thread(interval=0)
    tasks.TICKS.clear()
    stop = run_scheduler_thread(interval=0.1)
    try:
        deadline = time.monotonic() + 10
        while not tasks.TICKS and time.monotonic() < deadline:
            run_worker()  # runs what the thread enqueued: the ticks are the event
            time.sleep(0.1)
    finally:
        stop.set()
    assert tasks.TICKS


def test_task_kwargs_with_timestamp_is_rejected_at_decoration() -> None:
    """The seed failed every slot at enqueue ("multiple values for timestamp"), logged."""
    with pytest.raises(ValueError, match="may not contain 'timestamp'"):
        periodic("* * * * *", task_kwargs={"timestamp": 1})
    with pytest.raises(TypeError, match="task_kwargs must be a dict"):
        periodic("* * * * *", task_kwargs=[1])  # type: ignore[arg-type]


def test_periodic_max_delay_seconds_reaches_the_schedule() -> None:
    from django.test import override_settings

    from skiplock.contrib.django import SkiplockBackend
    from skiplock.contrib.django.periodic_tasks import attach_periodic_tasks

    from .conftest import KIND, SCHEMA

    options = {"schema": SCHEMA} if KIND == "postgres" else {}
    fresh = SkiplockBackend("default", {"QUEUES": ["default", "other"], "OPTIONS": options})
    with override_settings(PERIODIC_MAX_DELAY_SECONDS=5):
        attach_periodic_tasks(fresh)
    schedule = fresh.app.schedules["tick-every-second"]
    assert schedule.max_delay == 5.0
    assert schedule.missed == "latest"  # the latest missed slot runs if at most 5 s late


def test_a_bad_periodic_max_delay_is_a_check_error() -> None:
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError
    from django.test import override_settings

    for bad in (-1, "600", None):
        with (
            override_settings(PERIODIC_MAX_DELAY_SECONDS=bad),
            pytest.raises(SystemCheckError, match=r"skiplock\.E005"),
        ):
            call_command("check")


def test_a_sync_task_holding_every_thread_does_not_stop_the_scheduler() -> None:
    """The seed swept on the one thread its sync tasks ran on: a 13 s sync task lost a slot.
    Here every thread is held by a sync task and the per-second slots still fire."""
    results = [tasks.nap.enqueue(3.0) for _ in range(2)]
    tasks.TICKS.clear()

    async def main() -> None:
        options = {"concurrency": 2, "interval": 0.05, "shutdown_timeout": 10.0}
        work = asyncio.create_task(run_worker_async(**options))
        started = time.monotonic()
        while len(set(tasks.TICKS)) < 2 and time.monotonic() - started < 20:
            await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(work, 20)

    asyncio.run(main())
    naps = [tasks.nap.get_result(r.id) for r in results]
    assert all(str(n.status) == "SUCCESSFUL" for n in naps)
    from skiplock.contrib.django.models import Job

    # slots that came due while both naps (3 s) held both threads were enqueued on time
    busy_from = max(n.started_at for n in naps).timestamp()
    busy_to = min(n.finished_at for n in naps).timestamp()
    during = [
        (job.kwargs["timestamp"], job.created_at.timestamp())
        for job in Job.objects.filter(task=tasks.tick.module_path)
        if busy_from + 0.5 < job.kwargs["timestamp"] < busy_to - 0.5
    ]
    assert during, (busy_from, busy_to)
    assert all(created - slot < 1.0 for slot, created in during), during
