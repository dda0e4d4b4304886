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
