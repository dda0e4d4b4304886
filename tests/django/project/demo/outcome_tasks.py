"""Tasks of the outcome tests (test_outcomes.py): what Django is told matches what is stored."""

from __future__ import annotations

import pathlib
import threading
import time
from typing import Any

from django.tasks import TaskContext, task

from skiplock.contrib.django import skiplock_options

RELEASE = threading.Event()
"""Set by a test to let ``held_until_released`` return (the test and the worker share memory)."""


@task
@skiplock_options(timeout=0.3)
def sleeps_past_its_timeout(seconds: float) -> float:
    """A sync task that outlives its timeout: the row is FAILED while its thread still runs."""
    time.sleep(seconds)
    return seconds


@task
@skiplock_options(timeout=0.3)
async def awaits_past_its_timeout(seconds: float) -> float:
    import asyncio

    await asyncio.sleep(seconds)
    return seconds


@task
async def async_returns_a_set() -> Any:
    """An async task's return value JSON cannot hold."""
    return {1, 2}


@task
def marks_then_sleeps(marker: str, seconds: float) -> float:
    """Creates ``marker`` when its code starts, then sleeps: a test reads it while it runs."""
    pathlib.Path(marker).touch()
    time.sleep(seconds)
    return seconds


@task(takes_context=True)
def who_runs_me(context: TaskContext) -> dict[str, Any]:
    started = context.task_result.started_at
    return {
        "worker_ids": context.task_result.worker_ids,
        "attempt": context.attempt,
        "started_at": "naive" if started.tzinfo is None else "aware",
    }


@task
async def held_until_released() -> str:
    import asyncio

    while not RELEASE.is_set():
        await asyncio.sleep(0.01)
    return "released"


@task
@skiplock_options(visibility_timeout=1.0, max_reclaims=1)
def kills_its_worker(log: str) -> None:
    """Notes each run in ``log``, then SIGKILLs its own worker process (every time)."""
    import os
    import signal

    with open(log, "a") as out:
        out.write("run\n")
    os.kill(os.getpid(), signal.SIGKILL)


BACKOFF_CALLS: list[dict[str, Any]] = []


def stop_after_two(exception: BaseException, task_result: Any) -> float | None:
    """new-features#142's backoff: seconds to the next attempt, or None to stop."""
    BACKOFF_CALLS.append(
        {
            "exception": type(exception).__name__,
            "status": task_result.status,
            "attempts": task_result.attempts,
            "error": task_result.errors[0].exception_class_path,
        }
    )
    return 0 if task_result.attempts < 2 else None


@task(max_attempts=5, backoff=stop_after_two)
def fails_with_a_backoff() -> None:
    raise ValueError("always")


def a_minute_later(exception: BaseException, task_result: Any) -> float | None:
    return 60


@task(max_attempts=2, backoff=a_minute_later)
def retried_a_minute_later() -> None:
    raise ValueError("once")


@task(max_attempts=2, backoff=lambda exception, task_result: 0, takes_context=True)
def killed_then_fails_then_succeeds(context: TaskContext, marker: str) -> dict[str, Any]:
    """Attempt 1 marks ``marker`` and sleeps (a test SIGKILLs its worker process); attempt 2
    fails; attempt 3 returns its attempt and the worker_ids it was given. Two attempts of its
    own: the death is not one."""
    attempt = context.attempt
    if attempt == 1:
        pathlib.Path(marker).touch()
        time.sleep(120)
    if attempt == 2:
        raise ValueError("its own first failure")
    return {"attempt": attempt, "worker_ids": context.task_result.worker_ids}
