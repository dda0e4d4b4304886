"""The benchmark's task: a sync no-op (Django tasks are sync by default)."""

from __future__ import annotations

from django.tasks import task


@task
def noop() -> None:
    return None


@task
async def anoop() -> None:
    return None
