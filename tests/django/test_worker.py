"""``manage.py concurrent_worker`` / ``run_worker_async``: skiplock's own Worker on the Django
backend, its options checked at the edge, and SIGTERM draining the tasks that run."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import threading
import time
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.tasks import TaskResultStatus
from django.tasks.signals import task_started

from skiplock.contrib.django.worker import run_worker_async

from .project.demo import tasks


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--concurrency=0"], "--concurrency must be at least 1"),
        (
            ["--backend=nope"],
            "--backend: unknown backend 'nope' (valid: default, immediate, jobs, tasksdb)",
        ),
        (["--queue-name=typo"], "--queue-name: unknown queue 'typo' (valid: default, other, *)"),
        (["--interval=0"], "--interval must be a positive"),
    ],
)
def test_bad_options_say_what_is_valid(options: list[str], message: str) -> None:
    with pytest.raises(CommandError) as err:
        call_command("concurrent_worker", *options, "--burst")
    assert message in str(err.value)


def test_concurrent_worker_runs_tasks_concurrently() -> None:
    results = [tasks.nap.enqueue(0.5) for _ in range(5)]
    started = time.monotonic()
    call_command("concurrent_worker", "--concurrency=5", "--burst", "--queue-name=*")
    elapsed = time.monotonic() - started
    for r in results:
        assert tasks.nap.get_result(r.id).status == TaskResultStatus.SUCCESSFUL
    assert elapsed < 2.0, f"five 0.5 s tasks at concurrency 5 took {elapsed:.2f} s"


def test_sigterm_drains_the_running_task() -> None:
    result = tasks.nap.enqueue(0.5)
    started = threading.Event()

    def on_start(sender: Any, task_result: Any, **_: Any) -> None:
        if task_result.id == result.id:
            started.set()

    async def main() -> None:
        work = asyncio.create_task(run_worker_async(concurrency=2, interval=0.05))
        # Django's own task_started signal is the event: the task's code is running
        assert await asyncio.to_thread(started.wait, 10)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(work, 10)

    task_started.connect(on_start)
    try:
        asyncio.run(main())
    finally:
        task_started.disconnect(on_start)
    assert tasks.nap.get_result(result.id).status == TaskResultStatus.SUCCESSFUL


def test_worker_any_queue_option(backend: Any) -> None:
    result = tasks.add.using(queue_name="other").enqueue(1, 1)
    call_command("concurrent_worker", "--queue-name=other", "--burst")
    assert tasks.add.get_result(result.id).return_value == 2


def test_task_worker_runs_one_task_at_a_time() -> None:
    on_db = tasks.nap.using(backend="tasksdb")
    results = [on_db.enqueue(0.3) for _ in range(3)]
    call_command("task_worker", "--backend=tasksdb", "--burst", "--no-reload", "--interval=0.05")
    done = [on_db.get_result(r.id) for r in results]
    assert all(str(r.status) == "SUCCESSFUL" for r in done)
    finals = sorted((r.started_at, r.finished_at) for r in done)
    for (_, end), (start, _) in itertools.pairwise(finals):
        assert start >= end  # sequential: each started after the one before finished


def test_task_worker_forwards_options_and_has_no_concurrency() -> None:
    other = tasks.add.using(queue_name="other").enqueue(2, 2)
    call_command("task_worker", "--queue-name=other", "--burst", "--no-scheduler", "--no-reload")
    assert tasks.add.get_result(other.id).return_value == 4
    with pytest.raises(CommandError, match="--queue-name: unknown queue 'typo'"):
        call_command("task_worker", "--queue-name=typo", "--burst")
    with pytest.raises(TypeError, match="concurrency"):
        call_command("task_worker", concurrency=4, burst=True)


def test_comma_separated_queue_names() -> None:
    a = tasks.add.using(queue_name="other").enqueue(1, 2)
    b = tasks.add.enqueue(1, 3)
    call_command("concurrent_worker", "--queue-name=default,other", "--burst", "--no-scheduler")
    assert [tasks.add.get_result(r.id).return_value for r in (a, b)] == [3, 4]


def test_run_worker_runs_on_a_thread_that_is_not_main() -> None:
    """The seed failed there (set_wakeup_fd only works in main thread)."""
    from skiplock.contrib.django import run_worker

    result = tasks.add.enqueue(5, 5)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            run_worker(burst=True, scheduler=False, interval=0.05)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(30)
    assert not errors, errors
    assert tasks.add.get_result(result.id).return_value == 10


def test_processes_must_be_positive() -> None:
    with pytest.raises(CommandError, match="--processes must be at least 1"):
        call_command("concurrent_worker", "--processes=0", "--burst")


@pytest.mark.parametrize("command", ["concurrent_worker", "task_worker"])
def test_processes_are_bounded_by_the_cpus_unless_forced(command: str) -> None:
    """Above 4 per usable CPU ``--processes`` is refused before any child starts, as
    ``skiplock worker`` refuses it; ``--force-processes`` passes the bound (the bad interval
    then stops the command before it starts any child)."""
    bound = 4 * len(os.sched_getaffinity(0))
    with pytest.raises(CommandError) as err:
        call_command(command, f"--processes={bound + 1}", "--burst")
    assert f"--processes {bound + 1}: more than 4 per CPU ({bound} for the" in str(err.value)
    assert "--force-processes" in str(err.value)
    with pytest.raises(CommandError, match="--interval must be a positive"):
        call_command(
            command, f"--processes={bound + 1}", "--force-processes", "--interval=0", "--burst"
        )
