"""What Django is told is what was stored: ``task_finished``'s status, ``started_at`` and
RUNNING, ``worker_ids``, ``USE_TZ=False``, stopping a worker run from code (a handle, a
cancellation, SIGQUIT) and the missing-schema hint."""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.tasks import TaskResultStatus
from django.tasks.signals import task_finished

from skiplock.contrib.django import worker as worker_module
from skiplock.contrib.django.models import Job
from skiplock.contrib.django.worker import run_worker, run_worker_async

from .processes import WorkerProcesses, wait_for
from .project.demo import outcome_tasks, tasks


def burst() -> None:
    call_command("concurrent_worker", "--burst", "--no-scheduler", "--interval=0.05")


@pytest.fixture
def finished() -> Iterator[dict[str, str]]:
    """``task_finished`` as a receiver sees it: result id -> status."""
    seen: dict[str, str] = {}

    def receiver(task_result: Any, **_: Any) -> None:
        seen[task_result.id] = task_result.status

    task_finished.connect(receiver)
    try:
        yield seen
    finally:
        task_finished.disconnect(receiver)


@pytest.mark.parametrize(
    ("task", "args", "stored"),
    [
        (tasks.add, (1, 2), TaskResultStatus.SUCCESSFUL),
        (tasks.explode, ("x",), TaskResultStatus.FAILED),
        (tasks.returns_a_set, (), TaskResultStatus.FAILED),
        (outcome_tasks.sleeps_past_its_timeout, (1.0,), TaskResultStatus.FAILED),
        (outcome_tasks.awaits_past_its_timeout, (5.0,), TaskResultStatus.FAILED),
    ],
)
def test_task_finished_carries_the_status_that_was_stored(
    finished: dict[str, str], task: Any, args: Any, stored: str
) -> None:
    result = task.enqueue(*args)
    burst()
    assert task.get_result(result.id).status == stored
    # a timed-out sync task's thread returns after the row was written: its signal follows
    assert wait_for(lambda: finished.get(result.id), 20, "task_finished") == stored


def test_a_retried_failure_is_finished_as_ready_then_successful(finished: dict[str, str]) -> None:
    statuses: list[str] = []

    def receiver(task_result: Any, **_: Any) -> None:
        statuses.append(task_result.status)

    result = tasks.flaky.enqueue("retried")
    task_finished.connect(receiver)
    try:
        burst()
    finally:
        task_finished.disconnect(receiver)
    assert statuses == [TaskResultStatus.READY, TaskResultStatus.SUCCESSFUL]
    assert tasks.flaky.get_result(result.id).status == TaskResultStatus.SUCCESSFUL


@pytest.fixture
def thread_worker() -> Iterator[Any]:
    """``run_worker`` on a thread of this process, stopped through its handle at teardown."""
    handle = worker_module.WorkerHandle()
    options = {"scheduler": False, "interval": 0.05, "shutdown_timeout": 0.5, "handle": handle}
    thread = threading.Thread(target=run_worker, kwargs=options, daemon=True)
    thread.start()
    try:
        yield handle
    finally:
        handle.stop()
        handle.stop()
        thread.join(30)
        assert not thread.is_alive()


def test_running_is_read_from_when_the_code_started(thread_worker: Any, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    result = outcome_tasks.marks_then_sleeps.enqueue(str(marker), 1.5)
    wait_for(marker.exists, 30, "the task's start")
    running = outcome_tasks.marks_then_sleeps.get_result(result.id)
    assert running.status == TaskResultStatus.RUNNING  # not READY until a heartbeat
    assert running.started_at is not None
    started = running.started_at.timestamp()
    assert running.enqueued_at.timestamp() <= started <= marker.stat().st_mtime + 0.05


def test_worker_ids_name_the_worker_that_ran_each_attempt() -> None:
    result = outcome_tasks.who_runs_me.enqueue()
    burst()
    done = outcome_tasks.who_runs_me.get_result(result.id)
    me = f"{socket.gethostname()}:{__import__('os').getpid()}"
    assert done.return_value == {"worker_ids": [me], "attempt": 1, "started_at": "aware"}
    assert done.worker_ids == [me]


def _local_shell(workers: WorkerProcesses, code: str, marker: str) -> list[str]:
    """Run ``code`` in ``manage.py shell`` under ``USE_TZ=False``; the words it printed after
    ``marker``. Kolkata is UTC+5:30 all year: a naive local time read as UTC is 5.5 h off
    (London, the project's zone, is UTC in winter, so it could not tell)."""
    local = {"SKIPLOCK_DJANGO_USE_TZ": "0", "SKIPLOCK_DJANGO_TIME_ZONE": "Asia/Kolkata"}
    proc = workers.start("shell", "-c", code, env=local)
    assert proc.wait(90) == 0, proc.output()
    assert marker in proc.output(), proc.output()
    return proc.output().split(marker, 1)[1].split()


def test_use_tz_false_run_after_from_timezone_now(workers: WorkerProcesses) -> None:
    code = (
        "from datetime import timedelta\n"
        "from django.utils import timezone\n"
        "from tests.django.project.demo import tasks\n"
        "r = tasks.add.using(run_after=timezone.now() + timedelta(seconds=30)).enqueue(1, 1)\n"
        "print('ENQUEUED', r.id)\n"
    )
    job_id = int(_local_shell(workers, code, "ENQUEUED")[0])
    job = Job.objects.get(id=job_id)
    ahead = job.run_at - job.created_at
    assert timedelta(seconds=25) < ahead < timedelta(seconds=35)  # local time read as local


def test_use_tz_false_results_carry_naive_local_times(workers: WorkerProcesses) -> None:
    """As Django's own backends under ``USE_TZ=False``: ``timezone.now() - result.enqueued_at``
    works (an aware UTC time raised TypeError) and reads local time in ``TIME_ZONE``."""
    code = (
        "from django.core.management import call_command\n"
        "from django.utils import timezone\n"
        "from tests.django.project.demo import outcome_tasks, tasks\n"
        "r = tasks.add.enqueue(1, 1)\n"
        "seen = [r.enqueued_at]\n"
        "call_command('concurrent_worker', '--burst', '--no-scheduler', '--interval=0.05')\n"
        "done = tasks.add.get_result(r.id)\n"
        "seen += [done.enqueued_at, done.started_at, done.finished_at, done.last_attempted_at]\n"
        "w = outcome_tasks.who_runs_me.enqueue()\n"
        "call_command('concurrent_worker', '--burst', '--no-scheduler', '--interval=0.05')\n"
        "seen.append(outcome_tasks.who_runs_me.get_result(w.id).return_value['started_at'])\n"
        "ages = [abs((timezone.now() - t).total_seconds()) for t in seen[:-1]]\n"
        "print('AGES', max(ages), 'NAIVE', all(t.tzinfo is None for t in seen[:-1]), seen[-1])\n"
    )
    ages, _, naive, context = _local_shell(workers, code, "AGES")[:4]
    assert float(ages) < 60  # local, not 5.5 h away
    assert naive == "True"
    assert context == "naive"  # the running task's TaskResult too


def _status(task: Any, result_id: str) -> str:
    return str(task.get_result(result_id).status)


def _never_left(backend: Any, result_id: str) -> None:
    """A held job these tests leave pending (released, as they assert) is cancelled: another
    test's worker (a process, whose release never comes) would hold a slot with it for ever."""
    backend.app.run_sync(backend.app.cancel_job(int(result_id)))


def test_a_handle_stops_run_worker_on_another_thread(tmp_path: Path, backend: Any) -> None:
    handle = worker_module.WorkerHandle()
    options = {"scheduler": False, "interval": 0.05, "shutdown_timeout": 0.2, "handle": handle}
    thread = threading.Thread(target=run_worker, kwargs=options, daemon=True)
    outcome_tasks.RELEASE.clear()
    result = outcome_tasks.held_until_released.enqueue()
    try:
        thread.start()
        task = outcome_tasks.held_until_released
        wait_for(lambda: _status(task, result.id) == "RUNNING", 30, "the task's start")
        handle.stop()
        thread.join(30)
        assert not thread.is_alive()
        assert _status(task, result.id) == "READY"  # released by the drain, not left RUNNING
    finally:
        _never_left(backend, result.id)


def test_cancelling_run_worker_async_releases_its_tasks(backend: Any) -> None:
    outcome_tasks.RELEASE.clear()
    task = outcome_tasks.held_until_released
    result = task.enqueue()
    try:
        _run_and_cancel(task, result.id)
    finally:
        _never_left(backend, result.id)


def _run_and_cancel(task: Any, result_id: str) -> None:
    """run_worker_async until the held task runs, then cancelled: the task is released."""

    async def main() -> None:
        worker = asyncio.ensure_future(
            run_worker_async(scheduler=False, interval=0.05, shutdown_timeout=0.2)
        )
        while await asyncio.to_thread(_status, task, result_id) != "RUNNING":
            await asyncio.sleep(0.02)
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker

    thread = threading.Thread(target=asyncio.run, args=(main(),))
    thread.start()
    thread.join(60)
    assert _status(task, result_id) == "READY"  # today: RUNNING under a 5-minute lease


def test_sigquit_drains_like_sigterm(workers: WorkerProcesses) -> None:
    idle = ("--queue-name=other", "--shutdown-timeout=1")
    proc = workers.start("concurrent_worker", "--no-scheduler", "--interval=0.05", *idle)
    wait_for(lambda: "ready:" in proc.output(), 60, "the worker's start")
    proc.signal(signal.SIGQUIT)
    assert proc.wait(30) == 0, proc.output()
    assert "received SIGQUIT: draining" in proc.output()


def test_the_missing_schema_hint_says_manage_py_migrate(
    workers: WorkerProcesses, tmp_path: Path
) -> None:
    empty = str(tmp_path / "unmigrated.sqlite3")
    proc = workers.start(
        "concurrent_worker",
        "--backend=jobs",
        "--burst",
        "--no-scheduler",
        env={"SKIPLOCK_DJANGO_JOBS_SQLITE": empty},
    )
    assert proc.wait(60) != 0
    assert "manage.py migrate" in proc.output(), proc.output()


def test_a_task_that_kills_its_worker_runs_again_then_ends(
    workers: WorkerProcesses, tmp_path: Path, backend: Any
) -> None:
    """One Django attempt, one reclaim (``max_reclaims=1``): the first death gives the task
    back (not FAILED), the second ends it FAILED "lease expired" (seed 000's rule)."""
    log = tmp_path / "runs"
    task = outcome_tasks.kills_its_worker
    result = task.enqueue(str(log))
    fast = ("--no-scheduler", "--interval=0.05")
    try:
        for runs in (1, 2):  # each worker runs it once and dies of it
            doomed = workers.start("concurrent_worker", *fast)
            assert doomed.wait(90) == -signal.SIGKILL, doomed.output()
            assert len(log.read_text().splitlines()) == runs
            assert _status(task, result.id) != "FAILED"  # its death was not its failure
        sweeper = workers.start("concurrent_worker", *fast)  # reclaims the second lease
        wait_for(lambda: _status(task, result.id) == "FAILED", 90, "the task to end")
        sweeper.signal(signal.SIGTERM)
        assert sweeper.wait(60) == 0, sweeper.output()
    finally:  # never leave it for another test's worker to run (and die of)
        backend.app.run_sync(backend.app.cancel_job(int(result.id)))
    assert log.read_text().splitlines() == ["run", "run"]
    done = task.get_result(result.id)
    # the second worker's death: seen at once by the third (its process is gone), the lease
    # not waited out; either way a reclaim, naming the dead worker
    assert "exited (its process is gone); reclaimed by worker" in done.errors[0].traceback
    assert len(done.worker_ids) == 2


@pytest.mark.parametrize(("options", "lease_s"), [((), 60.0), (("--lease=7",), 37.0)])
def test_a_django_task_s_lease_is_short_and_set_by_lease(
    workers: WorkerProcesses, tmp_path: Path, backend: Any, options: tuple[str, ...], lease_s: float
) -> None:
    """A task without a timeout is leased for ``--lease`` (default 30 s) plus the worker's
    30 s margin: a task whose worker died runs again within a minute (skiplock's own default
    was 300 + 30 s)."""
    marker = tmp_path / "started"
    result = outcome_tasks.marks_then_sleeps.enqueue(str(marker), 2.0)
    proc = workers.start("concurrent_worker", "--no-scheduler", "--interval=0.05", *options)
    wait_for(marker.exists, 60, "the task's start")
    job = backend.app.run_sync(backend.app.get_job(int(result.id)))
    assert job.lease_expires_at is not None and job.attempted_at is not None
    leased = (job.lease_expires_at - job.attempted_at).total_seconds()
    assert lease_s - 1 <= leased <= lease_s + 1
    proc.signal(signal.SIGTERM)
    assert proc.wait(60) == 0, proc.output()


@pytest.mark.parametrize("lease", ["0", "nan", "86401"])
def test_a_bad_lease_is_one_error_before_the_startup_line(
    workers: WorkerProcesses, lease: str
) -> None:
    proc = workers.start("concurrent_worker", f"--lease={lease}", "--burst", "--no-scheduler")
    assert proc.wait(60) != 0
    output = proc.output()
    assert "--lease must be a number of seconds in 1..86400" in output, output
    assert "Starting concurrent worker" not in output, output  # a script grepping it: not up
    assert "Traceback" not in output, output


def test_worker_ids_name_the_worker_of_each_failed_attempt(backend: Any) -> None:
    """A failed attempt's error record names its worker (core writes ``worker``), a reclaimed
    one names the worker that died in its message, and the attempt without a record ran on
    the worker that claimed it last: three attempts, three workers (the history used to
    give every failed attempt the last claimer's name)."""
    import dataclasses

    from skiplock.contrib.django._results import worker_ids

    result = outcome_tasks.who_runs_me.enqueue()
    burst()
    record = backend.app.run_sync(backend.app.get_job(int(result.id)))
    lost = "lease expired (worker gone:7 stopped heartbeating)"
    history = dataclasses.replace(
        record,
        attempt=3,
        locked_by="last:3",
        errors=[
            {"attempt": 1, "message": "ValueError: boom", "worker": "first:1"},
            {"attempt": 2, "message": lost, "worker": ""},
        ],
    )
    assert worker_ids(history) == ["first:1", "gone:7", "last:3"]
