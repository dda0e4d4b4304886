"""Receivers of Django's task signals that use the ORM, as a project writes them (an audit row
per task, a lookup), under ``concurrent_worker`` on both routes the docs show: skiplock's
backend and django-tasks-db's ``DatabaseBackend`` (issue 42 item 9). Django's own workers send
these signals on a plain thread, where the ORM works; skiplock's workers run on an event loop,
where Django refuses it (``SynchronousOnlyOperation``). Each test runs on both databases."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.tasks import TaskResultStatus
from django.tasks.signals import task_enqueued, task_finished, task_started

from skiplock.contrib.django import WorkerHandle
from skiplock.contrib.django.worker import run_worker_async

from .project.demo import tasks


class Audit:
    """Receivers that write a row per signal through the ORM (a ``Group`` named after the
    signal and the task's id) and remember what they were sent."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []
        self.enqueued = threading.Event()

    def started(self, sender: Any, task_result: Any, **_: Any) -> None:
        self._write("started", task_result)

    def finished(self, sender: Any, task_result: Any, **_: Any) -> None:
        self._write("finished", task_result)

    def on_enqueued(self, sender: Any, task_result: Any, **_: Any) -> None:
        self._write("enqueued", task_result)
        self.enqueued.set()

    def _write(self, what: str, task_result: Any) -> None:
        Group.objects.create(name=f"{what}:{task_result.id}")  # the ORM, on whatever thread
        self.seen.append((what, str(task_result.id), str(task_result.status)))

    def rows(self, result_id: str) -> set[str]:
        names = Group.objects.filter(name__endswith=f":{result_id}").values_list("name", flat=True)
        return {name.split(":", 1)[0] for name in names}


@pytest.fixture
def audit() -> Iterator[Audit]:
    recorder = Audit()
    task_started.connect(recorder.started)
    task_finished.connect(recorder.finished)
    task_enqueued.connect(recorder.on_enqueued)
    try:
        yield recorder
    finally:
        task_started.disconnect(recorder.started)
        task_finished.disconnect(recorder.finished)
        task_enqueued.disconnect(recorder.on_enqueued)
        Group.objects.filter(name__contains=":").delete()


ROUTES = {
    "skiplock": lambda task: task,
    "tasksdb": lambda task: task.using(backend="tasksdb"),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_receivers_using_the_orm_run_for_sync_and_async_tasks(route: str, audit: Audit) -> None:
    """On django-tasks-db's backend every task was FAILED (``task_started``'s receiver raised
    on the loop); on skiplock's, an async task's receivers raised, logged and lost."""
    on = ROUTES[route]
    added = on(tasks.add).enqueue(2, 3)
    doubled = on(tasks.async_double).enqueue(21)
    call_command(
        "concurrent_worker",
        f"--backend={'default' if route == 'skiplock' else route}",
        "--burst",
        "--no-scheduler",
        "--interval=0.05",
    )
    added.refresh()
    doubled.refresh()
    assert (added.status, added.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    assert (doubled.status, doubled.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
    for result in (added, doubled):
        assert audit.rows(result.id) == {"enqueued", "started", "finished"}, result
        mine = [(what, status) for what, id_, status in audit.seen if id_ == result.id]
        assert mine == [("enqueued", "READY"), ("started", "RUNNING"), ("finished", "SUCCESSFUL")]


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_failing_async_task_s_receivers_use_the_orm(route: str, audit: Audit) -> None:
    result = ROUTES[route](tasks.async_explode).enqueue("no")
    call_command(
        "concurrent_worker",
        f"--backend={'default' if route == 'skiplock' else route}",
        "--burst",
        "--no-scheduler",
        "--interval=0.05",
    )
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert "no" in result.errors[0].traceback
    assert audit.rows(result.id) == {"enqueued", "started", "finished"}
    assert ("finished", result.id, "FAILED") in audit.seen


def test_a_periodic_slot_on_skiplock_s_backend_sends_task_enqueued(audit: Audit) -> None:
    """The scheduler's enqueue of a ``@periodic`` slot sent no ``task_enqueued`` (every other
    enqueue does, django-tasks-db's periodic sweep too); its receiver uses the ORM too."""
    handle = WorkerHandle()

    async def main() -> None:
        work = asyncio.create_task(
            run_worker_async(concurrency=2, interval=0.05, shutdown_timeout=5.0, handle=handle)
        )
        try:  # the per-second tick's first slot is the event awaited
            assert await asyncio.to_thread(audit.enqueued.wait, 20), "no task_enqueued"
        finally:
            handle.stop()
            await asyncio.wait_for(work, 20)

    asyncio.run(main())
    from skiplock.contrib.django.models import Job

    ticks = [(id_, s) for what, id_, s in audit.seen if what == "enqueued"]
    assert ticks, audit.seen
    id_, status = ticks[0]
    assert status == "READY"
    job = Job.objects.get(id=int(id_))
    assert job.task == tasks.tick.module_path
    assert "enqueued" in audit.rows(id_)
