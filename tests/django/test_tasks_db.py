"""``concurrent_worker --backend=tasksdb``: django-tasks-db's own ``DatabaseBackend`` served by
skiplock's concurrent worker, its rows written the way django-tasks-db's ``db_worker`` writes
them (read back here through django-tasks-db's own ``get_result``), on both databases."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.tasks import TaskResultStatus
from django.tasks.signals import task_finished, task_started
from django_tasks_db.models import DBTaskResult

from .conftest import KIND, _pg
from .processes import WorkerProcesses, wait_for
from .project.demo import tasks


def on_db(task: Any) -> Any:
    return task.using(backend="tasksdb")


def burst(*options: str) -> None:
    call_command("concurrent_worker", "--backend=tasksdb", "--burst", "--interval=0.05", *options)


def test_sync_and_async_tasks_succeed_with_their_return_values() -> None:
    added = on_db(tasks.add).enqueue(2, 3)
    doubled = on_db(tasks.async_double).enqueue(21)
    burst()
    added.refresh()
    doubled.refresh()
    assert (added.status, added.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    assert (doubled.status, doubled.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
    assert len(added.worker_ids) == 1 and added.worker_ids[0].startswith("skiplock-")
    assert added.started_at and added.finished_at and added.finished_at >= added.started_at
    row = DBTaskResult.objects.get(id=added.id)
    assert (row.exception_class_path, row.traceback) == ("", "")


def test_failures_are_failed_with_class_path_and_traceback() -> None:
    boom = on_db(tasks.explode).enqueue("kaboom")
    burst()
    boom.refresh()
    assert boom.status == TaskResultStatus.FAILED
    assert boom.errors[0].exception_class_path == "tests.django.project.demo.tasks.Boom"
    assert "kaboom" in boom.errors[0].traceback
    with pytest.raises(ValueError, match="Task failed"):
        _ = boom.return_value


@pytest.mark.parametrize(
    ("task", "args", "exception"),
    [
        (tasks.raises_cancelled, (), "asyncio.exceptions.CancelledError"),
        (tasks.exits, (3,), "builtins.SystemExit"),
        (tasks.returns_a_set, (), "builtins.TypeError"),
    ],
)
def test_nothing_a_task_raises_strands_it_running(task: Any, args: Any, exception: str) -> None:
    """The seed left these RUNNING (CancelledError also lost a sub-worker; sys.exit ended the
    process): each is FAILED here and the worker goes on to the next task."""
    result = on_db(task).enqueue(*args)
    after = on_db(tasks.add).enqueue(1, 1)
    burst("--concurrency=1")
    result.refresh()
    after.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class_path == exception
    assert after.status == TaskResultStatus.SUCCESSFUL


def test_an_unimportable_task_path_is_failed() -> None:
    result = on_db(tasks.add).enqueue(1, 2)
    DBTaskResult.objects.filter(id=result.id).update(task_path="tests.gone.missing_task")
    burst()
    row = DBTaskResult.objects.get(id=result.id)
    assert row.status == TaskResultStatus.FAILED
    assert row.exception_class_path in ("builtins.ModuleNotFoundError", "builtins.ImportError")


def test_a_raising_task_started_receiver_fails_the_task_not_strands_it() -> None:
    def receiver(**_: Any) -> None:
        raise RuntimeError("receiver broke")

    result = on_db(tasks.add).enqueue(1, 2)
    task_started.connect(receiver)
    try:
        burst()
    finally:
        task_started.disconnect(receiver)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert "receiver broke" in result.errors[0].traceback


def test_core_signals_fire_with_the_backend_class() -> None:
    seen: list[tuple[str, Any, str]] = []

    def record(signal: Any, sender: Any, task_result: Any, **_: Any) -> None:
        seen.append((signal.__class__.__name__, sender, str(task_result.status)))

    def on_start(**kw: Any) -> None:
        record(task_started, kw["sender"], kw["task_result"])

    def on_finish(**kw: Any) -> None:
        record(task_finished, kw["sender"], kw["task_result"])

    result = on_db(tasks.add).enqueue(4, 4)
    task_started.connect(on_start)
    task_finished.connect(on_finish)
    try:
        burst()
    finally:
        task_started.disconnect(on_start)
        task_finished.disconnect(on_finish)
    from django_tasks_db import DatabaseBackend

    assert result.id
    assert [(s, st) for _, s, st in seen] == [
        (DatabaseBackend, "RUNNING"),
        (DatabaseBackend, "SUCCESSFUL"),
    ]


def test_takes_context_gets_djangos_task_context() -> None:
    result = on_db(tasks.attempt_of).enqueue()
    burst()
    result.refresh()
    assert result.return_value == {"attempt": 1, "id": result.id}


def test_priority_then_run_after_order_as_db_worker() -> None:
    from datetime import timedelta

    from django.utils import timezone

    low = on_db(tasks.add).using(priority=-10).enqueue(0, 1)
    high = on_db(tasks.add).using(priority=50).enqueue(0, 2)
    later = on_db(tasks.add).using(run_after=timezone.now() + timedelta(hours=1)).enqueue(0, 3)
    burst("--concurrency=1")
    rows = {str(r.id): r for r in DBTaskResult.objects.filter(id__in=[low.id, high.id, later.id])}
    order = sorted((rows[r.id].started_at, r.id) for r in (low, high))
    assert [i for _, i in order] == [high.id, low.id]
    assert rows[later.id].status == TaskResultStatus.READY  # not due: left alone


def test_only_its_queues_and_its_backend_alias() -> None:
    other = on_db(tasks.add).using(queue_name="other").enqueue(1, 1)
    mine = on_db(tasks.add).enqueue(1, 1)
    burst("--queue-name=default")
    assert DBTaskResult.objects.get(id=other.id).status == TaskResultStatus.READY
    assert DBTaskResult.objects.get(id=mine.id).status == TaskResultStatus.SUCCESSFUL
    burst("--queue-name=default,other")
    assert DBTaskResult.objects.get(id=other.id).status == TaskResultStatus.SUCCESSFUL


def test_a_worker_process_runs_tasks_concurrently_and_drains(
    workers: WorkerProcesses, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    naps = [on_db(tasks.nap).enqueue(1.0) for _ in range(4)]
    slow = on_db(tasks.nap_marked).enqueue(2.0, str(marker))
    awaited = [on_db(tasks.async_nap).enqueue(0.5) for _ in range(4)]
    proc = workers.start("concurrent_worker", "--backend=tasksdb", "--concurrency=5")
    wait_for(
        lambda: (
            DBTaskResult.objects.filter(
                id__in=[r.id for r in naps + awaited], status="SUCCESSFUL"
            ).count()
            == 8
        ),
        40,
        "eight tasks",
    )
    wait_for(marker.exists, 20, "the slow task to start")
    proc.signal(signal.SIGTERM)
    assert proc.wait(20) == 0, proc.output()
    slow.refresh()
    assert slow.status == TaskResultStatus.SUCCESSFUL  # drained before exiting
    rows = DBTaskResult.objects.filter(id__in=[r.id for r in naps])
    spread = max(r.finished_at for r in rows) - min(r.started_at for r in rows)
    assert spread.total_seconds() < 3.5, spread  # four 1 s sync tasks overlapped (not 4 s)


def test_bad_backend_kind_says_what_is_served() -> None:
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="nope"):
        call_command("concurrent_worker", "--backend=nope", "--burst")
    start = time.monotonic()
    burst()  # nothing ready: a burst returns at once
    assert time.monotonic() - start < 10


def test_a_writer_that_dies_ends_the_worker_with_its_error() -> None:
    """The writer is a Service in the worker's TaskGroup: its death (a bug, not a database
    error it retries) ends ``run`` with that error (before: the burst waited forever on a
    write nobody would make)."""
    import asyncio

    from django.tasks import task_backends

    from skiplock.contrib.django.tasks_db_worker import TasksDbWorker

    on_db(tasks.add).enqueue(1, 2)

    async def run() -> None:
        worker = TasksDbWorker(
            task_backends["tasksdb"],
            concurrency=1,
            interval=0.05,
            queue_names=None,
            shutdown_timeout=1.0,
        )

        def broken(batch: Any) -> None:
            raise RuntimeError("a bug in the writer")

        worker._write_batch = broken  # type: ignore[method-assign]
        running = asyncio.ensure_future(worker.run(burst=True))
        await asyncio.wait([running], timeout=20)  # a deadline: it ends by itself, at once
        if not running.done():  # before: hung on the write; only a cancel surfaced the error
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            raise AssertionError("the worker did not end when its writer died")
        running.result()

    with pytest.raises(RuntimeError, match="a bug in the writer"):
        asyncio.run(run())


def test_a_missing_table_is_one_line_saying_to_migrate(
    workers: WorkerProcesses, tmp_path: Path
) -> None:
    """A project that added django-tasks-db and never migrated: the worker retried its claim
    for ever (a traceback a second, backing off) without saying what to do."""
    env = {"SKIPLOCK_DJANGO_SQLITE": str(tmp_path / "unmigrated.sqlite3")}
    schema = f"dj_unmigrated_{uuid.uuid4().hex[:8]}"
    if KIND == "postgres":
        _pg(f'CREATE SCHEMA "{schema}"')
        env = {"SKIPLOCK_DJANGO_SCHEMA": schema}
    try:
        proc = workers.start("concurrent_worker", "--backend=tasksdb", "--no-scheduler", env=env)
        assert proc.wait(60) == 1, proc.output()
    finally:
        if KIND == "postgres":
            _pg(f'DROP SCHEMA "{schema}" CASCADE')
    out = proc.output()
    assert (
        "CommandError: task backend 'tasksdb': django-tasks-db's table "
        "'django_tasks_database_dbtaskresult' is missing from database 'default': "
        "run `manage.py migrate`"
    ) in out, out
    assert "Traceback" not in out, out
