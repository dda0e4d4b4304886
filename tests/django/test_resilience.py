"""Dropped connections: ``install_resilient_run`` (django-tasks-db's ``db_worker``) and both
backends under ``concurrent_worker`` survive ``pg_terminate_backend`` on their own sessions
(found by the ``application_name`` this test gives its worker; no other backend is touched),
and every task runs exactly once."""

from __future__ import annotations

import collections
import os
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.tasks import TaskResultStatus

from skiplock.contrib.django import install_resilient_run
from skiplock.contrib.django.resilience import ReconnectBackoff

from .processes import WorkerProcesses, wait_for
from .project.demo import tasks

postgres_only = pytest.mark.skipif(
    os.environ.get("SKIPLOCK_DJANGO_DB") != "postgres", reason="pg_terminate_backend"
)
DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres application_name=skiplock-killer"


def terminate(app_name: str) -> int:
    """Terminate every session named ``app_name`` (this test's worker's, nobody else's)."""
    with psycopg.connect(DSN, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (app_name,),
        ).fetchall()
    return len(rows)


class Killer:
    """Terminates the worker's sessions every ``every`` seconds on a thread until stopped."""

    def __init__(self, app_name: str, every: float = 0.4) -> None:
        self.app_name, self.every = app_name, every
        self.stop = threading.Event()
        self.killed = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.killed += terminate(self.app_name)

    def __enter__(self) -> Killer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


@pytest.fixture
def app_name() -> Iterator[str]:
    name = f"skiplock-test-{uuid.uuid4().hex[:10]}"
    yield name


def test_backoff_doubles_to_the_cap_and_resets() -> None:
    backoff = ReconnectBackoff()
    assert [backoff.next_delay() for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    backoff.succeeded()
    assert backoff.next_delay() == 1
    with pytest.raises(ValueError, match="first_s"):
        ReconnectBackoff(first_s=0)


def test_install_resilient_run_is_idempotent() -> None:
    from django_tasks_db.management.commands.db_worker import Worker

    install_resilient_run()
    patched = Worker.run
    assert install_resilient_run() is False
    assert Worker.run is patched
    with pytest.raises(ValueError, match="max_backoff_seconds"):
        install_resilient_run(0)


def test_a_shutdown_racing_an_error_is_raised_not_retried() -> None:
    from django.db import OperationalError
    from django_tasks_db.management.commands.db_worker import Worker

    from skiplock.contrib.django.resilience import _resilient_run

    calls: list[str] = []

    def broken_loop(self: Any) -> None:
        calls.append("run")
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        self.running = False  # a shutdown arrives while the loop fails again
        raise OperationalError("server closed the connection unexpectedly")

    worker = Worker(
        queue_names=["default"],
        interval=0.1,
        batch=False,
        backend_name="tasksdb",
        startup_delay=False,
        max_tasks=None,
        worker_id="w",
        excluded_queue_names=[],
    )
    run = _resilient_run(broken_loop, 30.0, lambda s: calls.append(f"sleep {s:g}"))
    with pytest.raises(OperationalError):
        run(worker)
    assert calls == ["run", "sleep 1", "run"]  # retried once, then raised: no retry over a stop


@postgres_only
def test_db_worker_survives_a_dropped_connection_with_install_resilient_run(
    workers: WorkerProcesses, app_name: str
) -> None:
    env = {"SKIPLOCK_DJANGO_APP_NAME": app_name, "SKIPLOCK_DJANGO_CONN_MAX_AGE": "600"}
    proc = workers.start("resilient_db_worker", env=env)
    first = tasks.add.using(backend="tasksdb").enqueue(1, 1)
    wait_for(lambda: _done(first), 30, "a first task")
    assert wait_for(lambda: terminate(app_name), 10, "a session to terminate")
    second = tasks.add.using(backend="tasksdb").enqueue(2, 2)
    wait_for(lambda: _done(second), 30, "a task after the connection dropped")
    assert proc.process.poll() is None, proc.output()  # plain db_worker exits here
    assert "reconnecting in 1s" in proc.output()
    proc.signal(signal.SIGTERM)
    proc.wait()


def _done(result: Any) -> bool:
    result.refresh()
    return bool(result.status == TaskResultStatus.SUCCESSFUL)


def _runs(path: Path) -> collections.Counter[str]:
    return collections.Counter(path.read_text().split()) if path.exists() else collections.Counter()


@postgres_only
@pytest.mark.parametrize("backend", ["default", "tasksdb"])
def test_concurrent_worker_survives_dropped_connections_mid_run(
    workers: WorkerProcesses, app_name: str, tmp_path: Path, backend: str
) -> None:
    log = tmp_path / "runs"
    env = {"SKIPLOCK_DJANGO_APP_NAME": app_name, "SKIPLOCK_DJANGO_CONN_MAX_AGE": "600"}
    task = tasks.append_line.using(backend=backend)
    results = [task.enqueue(str(log), f"t{i}", 0.2) for i in range(24)]
    args = [f"--backend={backend}", "--concurrency=4", "--interval=0.2", "--no-scheduler"]
    proc = workers.start("concurrent_worker", *args, env=env)
    with Killer(app_name) as killer:
        wait_for(lambda: all(_done(r) for r in results), 90, "every task despite the kills")
    assert killer.killed > 0  # the worker's sessions really were dropped while it worked
    assert proc.process.poll() is None, proc.output()
    runs = _runs(log)
    assert set(runs) == {f"t{i}" for i in range(24)}
    assert max(runs.values()) == 1, runs  # each ran exactly once
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0, proc.output()


def test_the_backoff_starts_again_after_a_task_ran() -> None:
    """The seed's wrapper kept doubling across recoveries: after a few blips, every later one
    waited 30 s. Here a task that ran in between resets it to 1 s."""
    from django.db import OperationalError

    from skiplock.contrib.django.resilience import _marking_success, _resilient_run

    sleeps: list[float] = []
    script = iter(["fail", "fail", "task", "fail", "stop"])

    class Loop:
        running = True

        def run_task(self) -> None:
            pass

        def loop(self) -> None:
            for step in script:
                if step == "fail":
                    raise OperationalError("connection dropped")
                if step == "task":
                    marked(self)
                    continue
                return

    marked = _marking_success(Loop.run_task)
    run = _resilient_run(Loop.loop, 30.0, sleeps.append)
    run(Loop())
    assert sleeps == [1.0, 2.0, 1.0]  # 1, 2, then a task ran: back to 1 (the seed: 4)


@postgres_only
def test_sessions_ended_under_a_backlog_leave_no_task_running_after_a_clean_exit(
    workers: WorkerProcesses, app_name: str
) -> None:
    """Issue 42 item 9: with the worker's sessions terminated while it drained a backlog, it
    exited 0 and left claimed tasks RUNNING until their lease ran out (a claim round whose
    second statement met an ended session, asyncpg's "cannot switch to state 12; another
    operation (2) is in progress", dropped what its first had committed). Every task it
    claimed is run or given back: after a clean exit none is left running."""
    from skiplock.contrib.django.models import Job

    env = {"SKIPLOCK_DJANGO_APP_NAME": app_name, "SKIPLOCK_DJANGO_CONN_MAX_AGE": "600"}
    results = [tasks.async_nap.enqueue(0.02) for _ in range(400)]
    results += [tasks.nap.enqueue(0.02) for _ in range(400)]
    ids = [int(r.id) for r in results]
    args = ["--concurrency=10", "--interval=0.2", "--no-scheduler"]
    proc = workers.start("concurrent_worker", *args, env=env)
    wait_for(lambda: Job.objects.filter(id__in=ids, state="succeeded").exists(), 60, "a start")
    with Killer(app_name, every=0.05) as killer:
        wait_for(lambda: killer.killed >= 60, 60, "sixty sessions terminated")
    proc.signal(signal.SIGTERM)
    assert proc.wait(60) == 0, proc.output()
    running = list(Job.objects.filter(id__in=ids, state="running").values_list("id", flat=True))
    assert running == [], proc.output()
