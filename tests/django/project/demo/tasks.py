"""Tasks of the test project's app (autodiscovered by skiplock's AppConfig)."""

from __future__ import annotations

from typing import Any

from django.tasks import TaskContext, task

from skiplock import RetryPolicy, current_job
from skiplock.contrib.django import periodic, skiplock_options


@task
def add(a: int, b: int) -> int:
    return a + b


@task
async def async_double(x: int) -> int:
    return 2 * x


class Boom(Exception):
    pass


@task
def explode(message: str) -> None:
    raise Boom(message)


@task(takes_context=True)
def attempt_of(context: TaskContext) -> dict[str, Any]:
    return {"attempt": context.attempt, "id": context.task_result.id}


@task
@skiplock_options(max_attempts=3, retry=RetryPolicy(base_s=0.0, jitter=False))
def flaky(marker: str) -> int:
    if current_job().attempt < 2:
        raise RuntimeError(f"first attempt of {marker}")
    return current_job().attempt


@task
@skiplock_options(unique_key="only-one")
def unique() -> None:
    return None


@task(backend="jobs")
def elsewhere(x: int) -> int:
    return x


@task
def count_users() -> int:
    from django.contrib.auth.models import User

    return User.objects.count()


@task
def nap(seconds: float) -> float:
    """A sync task that holds a worker thread: concurrency and drain tests."""
    import time

    time.sleep(seconds)
    return seconds


TICKS: list[int] = []


@periodic(cron="* * * * * *", periodic_id="tick-every-second")
@task
def tick(timestamp: int) -> int:
    """Per-second periodic task: records the slot it ran for (once-per-slot test)."""
    TICKS.append(timestamp)
    return timestamp
