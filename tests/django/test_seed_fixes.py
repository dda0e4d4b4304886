"""The seed's bugs that skiplock's Django backend fixes, each seen on the backend here (the
django-tasks-db worker's are in test_tasks_db.py): nothing a task raises strands it RUNNING,
one sync task does not stall async ones, an idle worker does not churn connections."""

from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Any

import psycopg
import pytest
from django.core.management import call_command
from django.tasks import TaskResultStatus
from django.tasks.signals import task_started

from skiplock.contrib.django.models import Job

from .processes import WorkerProcesses, wait_for
from .project.demo import tasks


def burst(*options: str) -> None:
    call_command("concurrent_worker", "--burst", "--no-scheduler", "--interval=0.05", *options)


@pytest.mark.parametrize(
    ("task", "args", "exception"),
    [
        (tasks.raises_cancelled, (), "asyncio.exceptions.CancelledError"),
        (tasks.exits, (3,), "builtins.SystemExit"),
        (tasks.returns_a_set, (), "TypeError"),
    ],
)
def test_nothing_a_task_raises_strands_it_running(task: Any, args: Any, exception: str) -> None:
    """The seed left CancelledError and SystemExit RUNNING (losing a sub-worker, or the
    process); here each is FAILED and the next task runs."""
    result = task.enqueue(*args)
    after = tasks.add.enqueue(1, 1)
    burst("--concurrency=1")
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert exception in result.errors[0].exception_class_path
    assert tasks.add.get_result(after.id).status == TaskResultStatus.SUCCESSFUL


def test_a_raising_task_started_receiver_does_not_strand_the_task() -> None:
    def receiver(**_: Any) -> None:
        raise RuntimeError("receiver broke")

    result = tasks.add.enqueue(2, 2)
    task_started.connect(receiver)
    try:
        burst()
    finally:
        task_started.disconnect(receiver)
    assert tasks.add.get_result(result.id).status == TaskResultStatus.SUCCESSFUL  # logged


def test_a_task_that_cannot_be_imported_is_failed_not_running(backend: Any) -> None:
    result = tasks.add.enqueue(1, 2)
    Job.objects.filter(id=int(result.id)).update(task="tests.gone.missing_task")
    burst()
    state = Job.objects.get(id=int(result.id)).state
    assert state == "dead"  # Django reads FAILED; the reason is kept in the job's errors


@pytest.mark.parametrize("backend_alias", ["default", "tasksdb"])
def test_one_sync_task_does_not_stall_async_tasks(backend_alias: str) -> None:
    """The seed: an 8 s sync task held back the other tasks' claims and result writes."""
    slow = tasks.nap.using(backend=backend_alias).enqueue(2.0)
    quick = [tasks.async_nap.using(backend=backend_alias).enqueue(0.1) for _ in range(3)]
    burst(f"--backend={backend_alias}", "--concurrency=4")
    slow_done = slow.task.get_result(slow.id)
    for r in quick:
        done = r.task.get_result(r.id)
        assert done.status == TaskResultStatus.SUCCESSFUL
        assert done.finished_at < slow_done.finished_at  # written while the sync task ran


@pytest.mark.skipif(os.environ.get("SKIPLOCK_DJANGO_DB") != "postgres", reason="sessions")
@pytest.mark.parametrize("backend_alias", ["default", "tasksdb"])
def test_an_idle_worker_opens_no_new_sessions(workers: WorkerProcesses, backend_alias: str) -> None:
    """The seed opened a new PostgreSQL session about every second (66 in 10 s at
    concurrency 10); an idle worker here keeps the sessions it has."""
    name = f"skiplock-churn-{uuid.uuid4().hex[:8]}"
    args = [f"--backend={backend_alias}", "--concurrency=10", "--interval=0.2"]
    proc = workers.start(
        "concurrent_worker", *args, "--no-scheduler", env={"SKIPLOCK_DJANGO_APP_NAME": name}
    )
    dsn = "host=127.0.0.1 port=5432 dbname=test user=postgres"

    def sessions() -> set[int]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchall()
        return {pid for (pid,) in rows}

    wait_for(sessions, 30, "the worker's sessions")
    time.sleep(1.0)  # the clock is the event here: sessions opened while starting settle
    seen = last = sessions()
    start = time.monotonic()
    while time.monotonic() - start < 3.0:
        last = sessions()
        seen |= last
        time.sleep(0.1)
    # Churn is a session closed and another opened: none may close while the worker idles.
    # The count: claim, outcome, few-outcomes (its generic plan's; issue 26) and LISTEN
    # sessions, and the shared pool's one, or two once its due-time look and the vacuumer's
    # look happen to overlap (seen 1.6 s after start on a loaded machine, then kept: the old
    # bound of 4 failed 2 runs in 5 on that alone).
    assert not seen - last, f"sessions closed while idling: {sorted(seen - last)}"
    assert len(seen) <= 6, f"{len(seen)} sessions in 3 s of idling"
    proc.signal(signal.SIGTERM)
    assert proc.wait(20) == 0, proc.output()
