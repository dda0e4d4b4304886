"""The seed project's tasks, as its README writes them (``@task`` from the ``django_tasks``
backport); only the import of ``periodic`` changed (``from django_tasks_concurrent import
periodic``)."""

from __future__ import annotations

from typing import Any

from django_tasks import task

from skiplock.contrib.django import periodic


@periodic(cron="* * * * * *")
@task()
def heartbeat(timestamp: int) -> int:
    return timestamp


@periodic(cron="* * * * * *", periodic_id="with-kwargs", task_kwargs={"source": "seed"})
@task()
def audit(**kwargs: Any) -> dict[str, Any]:
    return kwargs


@task()
def add(a: int, b: int) -> int:
    return a + b


@task()
def explode() -> None:
    raise RuntimeError("kaboom")
