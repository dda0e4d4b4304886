"""``concurrent_worker``/``task_worker`` as real OS processes on the test project: periodic
slots across two processes, SIGTERM drain, SIGKILL recovery, sync tasks on a real thread pool,
``--processes`` restarting a killed child, and a dying scheduler failing the process."""

from __future__ import annotations

import collections
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from django.tasks import TaskResultStatus

from skiplock.contrib.django.models import Job

from .processes import WorkerProcesses, wait_for
from .project.demo import tasks

FAST = ["--interval=0.1", "--shutdown-timeout=10"]


def _status(task: Any, result_id: str) -> str:
    return str(task.get_result(result_id).status)


def _ticks_since(started: float) -> collections.Counter[int]:
    rows = Job.objects.filter(task=tasks.tick.module_path).values_list("kwargs", flat=True)
    return collections.Counter(
        int(kw["timestamp"]) for kw in rows if int(kw["timestamp"]) >= int(started)
    )


def test_two_worker_processes_run_each_periodic_slot_once(workers: WorkerProcesses) -> None:
    started = time.time()
    procs = [workers.start("concurrent_worker", *FAST) for _ in range(2)]
    wait_for(lambda: len(_ticks_since(started)) >= 4, 40, "four per-second slots enqueued")
    for proc in procs:
        proc.signal(signal.SIGTERM)
    assert [p.wait() for p in procs] == [0, 0], [p.output() for p in procs]
    ticks = _ticks_since(started)
    assert ticks and max(ticks.values()) == 1, ticks  # exactly one job per slot
    done = Job.objects.filter(task=tasks.tick.module_path, state="succeeded")
    assert done.count() >= len(ticks) - 2  # the jobs ran (the last slots may be in flight)


def test_sigterm_drains_a_worker_process(workers: WorkerProcesses, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    running = tasks.nap_marked.enqueue(1.5, str(marker))
    queued = tasks.nap.enqueue(1.5)
    proc = workers.start("concurrent_worker", "--concurrency=1", "--no-scheduler", *FAST)
    wait_for(marker.exists, 30, "the first task to run")
    proc.signal(signal.SIGTERM)
    assert proc.wait() == 0, proc.output()
    assert _status(tasks.nap_marked, running.id) == TaskResultStatus.SUCCESSFUL  # drained
    assert _status(tasks.nap, queued.id) == TaskResultStatus.READY  # left for the next worker


def test_shutdown_timeout_gives_a_stuck_task_back(workers: WorkerProcesses, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    stuck = tasks.nap_marked.enqueue(60, str(marker))
    args = ["--concurrency=1", "--no-scheduler", "--interval=0.1", "--shutdown-timeout=1"]
    proc = workers.start("concurrent_worker", *args)
    wait_for(marker.exists, 30, "the task to run")
    proc.signal(signal.SIGTERM)
    assert proc.wait(15) == 0, proc.output()  # the deadline, not the 60 s task, ends it
    assert _status(tasks.nap_marked, stuck.id) == TaskResultStatus.READY  # given back


def test_sigkilled_workers_task_is_recovered(workers: WorkerProcesses, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    result = tasks.survives_a_kill.enqueue(60, str(marker))
    first = workers.start("concurrent_worker", "--no-scheduler", *FAST)
    wait_for(marker.exists, 30, "a start")
    first.signal(signal.SIGKILL)
    first.wait()
    workers.start("concurrent_worker", "--no-scheduler", *FAST)
    done = wait_for(
        lambda: _status(tasks.survives_a_kill, result.id) == "SUCCESSFUL", 30, "a recovery"
    )
    assert done
    assert tasks.survives_a_kill.get_result(result.id).return_value == 2  # the second attempt


def test_a_killed_child_s_task_comes_back_at_once_as_a_reclaim(
    workers: WorkerProcesses, tmp_path: Path
) -> None:
    """``--processes 2``: a child SIGKILLed mid-task has its lease released by the supervisor
    at once (the task has no timeout: its lease is a minute), and that release is a reclaim,
    not one of the task's own two attempts: attempt 2 fails, attempt 3 succeeds."""
    from .project.demo import outcome_tasks

    task = outcome_tasks.killed_then_fails_then_succeeds
    marker = tmp_path / "started"
    result = task.enqueue(str(marker))
    proc = workers.start("concurrent_worker", "--processes=2", "--no-scheduler", *FAST)
    wait_for(marker.exists, 60, "the first attempt")
    victim = int(Job.objects.get(id=int(result.id)).locked_by.rsplit(":", 1)[-1])
    import os

    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: task.get_result(result.id).is_finished, 40, "the task to end")
    done = task.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL, done.errors
    assert done.return_value["attempt"] == 3
    assert done.worker_ids[0].endswith(f":{victim}")  # the dead child ran attempt 1
    assert len(done.worker_ids) == 3
    assert done.return_value["worker_ids"] == done.worker_ids  # the task was told the same
    errors = Job.objects.get(id=int(result.id)).errors
    message = errors[0]["message"]  # not a lease's expiry: the supervisor, or the sibling
    assert "released by its supervisor" in message or "(its process is gone)" in message
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0, proc.output()


def test_a_task_whose_worker_another_worker_found_dead_comes_back_as_a_reclaim(
    workers: WorkerProcesses, tmp_path: Path
) -> None:
    """One worker SIGKILLed mid-task, then another started: it finds the dead one's process
    gone and takes its lease at once ("worker ... exited (its process is gone); reclaimed by
    worker ..."). That is a reclaim, not the task's own failure: with two attempts of its own,
    attempt 2 fails and attempt 3 succeeds (read as its own failure, attempt 2 ended it)."""
    from .project.demo import outcome_tasks

    task = outcome_tasks.killed_then_fails_then_succeeds
    marker = tmp_path / "started"
    result = task.enqueue(str(marker))
    doomed = workers.start("concurrent_worker", "--no-scheduler", *FAST)
    wait_for(marker.exists, 60, "the first attempt")
    doomed.process.kill()
    doomed.wait()
    proc = workers.start("concurrent_worker", "--no-scheduler", *FAST)
    wait_for(lambda: task.get_result(result.id).is_finished, 60, "the task to end")
    done = task.get_result(result.id)
    errors = Job.objects.get(id=int(result.id)).errors
    assert "exited (its process is gone); reclaimed by worker" in errors[0]["message"], errors
    assert done.status == TaskResultStatus.SUCCESSFUL, done.errors
    assert done.return_value["attempt"] == 3
    assert done.worker_ids[0].endswith(f":{doomed.pid}")  # the dead worker ran attempt 1
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0, proc.output()


def test_five_two_second_sync_tasks_run_at_once(workers: WorkerProcesses) -> None:
    results = [tasks.nap.enqueue(2.0) for _ in range(5)]
    proc = workers.start("concurrent_worker", "--concurrency=5", "--no-scheduler", *FAST)
    wait_for(
        lambda: all(_status(tasks.nap, r.id) == "SUCCESSFUL" for r in results), 40, "five naps"
    )
    proc.signal(signal.SIGTERM)
    assert proc.wait() == 0
    finals = [tasks.nap.get_result(r.id) for r in results]
    first_start: datetime = min(r.started_at for r in finals)
    last_end: datetime = max(r.finished_at for r in finals)
    makespan = (last_end - first_start).total_seconds()
    # serialised on one thread (the seed) this is 10 s; on a real pool about 2 s
    assert makespan < 4.0, f"five 2 s sync tasks at concurrency 5 took {makespan:.1f} s"


def test_processes_restart_a_killed_child(workers: WorkerProcesses) -> None:
    proc = workers.start("concurrent_worker", "--processes=2", "--no-scheduler", *FAST)
    children = wait_for(lambda: len(proc.children()) == 2 and proc.children(), 60, "two children")
    # the supervisor's own "worker PID ready" (it read the child's ready byte), not the
    # children's log lines: a child killed before the supervisor saw it ready is a start-up
    # failure, which stops every worker by design
    wait_for(
        lambda: all(f"worker {pid} ready" in proc.output() for pid in children),
        60,
        "the supervisor to see both children ready",
    )
    victim = children[0]
    import os

    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: len(proc.children()) == 2 and victim not in proc.children(), 30, "a restart")
    assert "restarting it" in proc.output()
    results = [tasks.add.enqueue(i, i) for i in range(4)]
    wait_for(lambda: all(_status(tasks.add, r.id) == "SUCCESSFUL" for r in results), 30, "work")
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0, proc.output()
    assert proc.children() == []


def test_a_dying_scheduler_stops_the_worker_nonzero(workers: WorkerProcesses) -> None:
    proc = workers.start(
        "concurrent_worker", *FAST, env={"SKIPLOCK_DJANGO_FAULTS": "scheduler-dies"}
    )
    code = proc.wait(40)
    assert code != 0, proc.output()
    assert "injected fault: the scheduler died" in proc.output()


def test_use_tz_false_runs_periodic_tasks(workers: WorkerProcesses) -> None:
    started = time.time()
    proc = workers.start("concurrent_worker", *FAST, env={"SKIPLOCK_DJANGO_USE_TZ": "0"})
    wait_for(
        lambda: (
            Job.objects.filter(task=tasks.tick.module_path, state="succeeded")
            .filter(kwargs__timestamp__gte=int(started) + 1)
            .exists()
        ),
        40,
        "a tick run under USE_TZ=False",
    )
    proc.signal(signal.SIGTERM)
    assert proc.wait() == 0, proc.output()
    assert "Traceback" not in proc.output()


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"  # a zombie nobody reaped has exited


def test_children_of_a_killed_supervisor_stop(workers: WorkerProcesses) -> None:
    """SIGKILL the ``--processes`` supervisor (a process manager escalating, the OOM killer):
    its children see it gone and stop as on SIGTERM, instead of claiming on as orphans."""
    proc = workers.start("concurrent_worker", "--processes=2", "--no-scheduler", *FAST)
    children = wait_for(lambda: len(c := proc.children()) == 2 and c, 60, "two children")
    for child in children:
        wait_for(lambda c=child: f"worker {c} ready" in proc.output(), 60, "each child ready")
    proc.signal(signal.SIGKILL)
    proc.wait()
    wait_for(lambda: not any(map(_running, children)), 30, "the orphans to stop")
