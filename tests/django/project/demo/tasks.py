"""Tasks of the test project's app (autodiscovered by skiplock's AppConfig)."""

from __future__ import annotations

from typing import Any

from django.tasks import TaskContext, task

from skiplock import RetryPolicy, current_job
from skiplock.contrib.django import periodic, skiplock_options

# a worker runs only the tasks its process registered (docs/django.md): the outcome tests'
# tasks live in a module of their own, so this autodiscovered one imports it
from . import outcome_tasks  # noqa: F401


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


@task
async def async_explode(message: str) -> None:
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


@task
def nap_marked(seconds: float, marker: str) -> float:
    """``nap`` that first creates the file ``marker``: a test in another process sees that
    the task's code is running (a worker process's memory is out of its reach)."""
    import pathlib
    import time

    pathlib.Path(marker).touch()
    time.sleep(seconds)
    return seconds


@task
@skiplock_options(max_attempts=3, visibility_timeout=1.0)
def survives_a_kill(seconds: float, marker: str) -> int:
    """Sleeps on its first attempt (a test SIGKILLs its worker then); returns its attempt."""
    import pathlib
    import time

    attempt = current_job().attempt
    if attempt == 1:
        pathlib.Path(marker).touch()
        time.sleep(seconds)
    return attempt


@task
async def async_nap(seconds: float) -> float:
    """An async task that awaits: it must run while sync tasks hold every thread."""
    import asyncio

    await asyncio.sleep(seconds)
    return seconds


@task
async def raises_cancelled() -> None:
    """A task that raises CancelledError itself (the seed left it RUNNING, its slot lost)."""
    import asyncio

    raise asyncio.CancelledError


@task
def exits(code: int) -> None:
    """A task that calls sys.exit (the seed's whole process exited, rows left RUNNING)."""
    import sys

    sys.exit(code)


@task
def returns_a_set() -> Any:
    """A return value JSON cannot hold."""
    return {1, 2}


@task
def append_line(path: str, line: str, seconds: float) -> str:
    """Append ``line`` to the file ``path`` (one line per execution), then sleep: a test counts
    how many times each task really ran."""
    import time

    with open(path, "a") as out:
        out.write(line + "\n")
    time.sleep(seconds)
    return line


@task(backend="tasksdb")
def stamp(**kwargs: Any) -> dict[str, Any]:
    """A django-tasks-db task that tests schedule with ``@periodic`` (registered per test)."""
    return kwargs


@task(backend="tasksdb")
def stamp_too(**kwargs: Any) -> dict[str, Any]:
    return kwargs


@task(backend="jobs")
def stamp_jobs(**kwargs: Any) -> dict[str, Any]:
    """The same on a SkiplockBackend (the ``jobs`` database)."""
    return kwargs


@task(backend="jobs")
def stamp_jobs_too(**kwargs: Any) -> dict[str, Any]:
    return kwargs


@task(backend="immediate")
def at_once() -> None:
    """On Django's ImmediateBackend, which no skiplock worker serves."""


@task(backend="tasksdb")
def stamp_args(*args: Any) -> list[Any]:
    """A periodic task taking neither ``timestamp`` nor ``**kwargs`` (the seed's "ignore it
    with ``*args``", which failed every slot)."""
    return list(args)
