"""A real project on the seed's stack (``tests/django/seedstack``: django-tasks-db's
``DatabaseBackend``, ``@periodic`` in ``shop/tasks.py``), switched as docs/django.md says and
run unchanged: ``manage.py concurrent_worker`` with the seed's defaults, two processes, its
per-second schedule enqueued once per slot into django-tasks-db's table."""

from __future__ import annotations

import collections
import os
import signal
import time
from typing import Any

from django.db import connection
from django_tasks_db.models import DBTaskResult

from .processes import WorkerProcesses, wait_for

SEED = {"DJANGO_SETTINGS_MODULE": "tests.django.seedstack.settings"}
SWITCHED = {"DJANGO_SETTINGS_MODULE": "tests.django.seedstack.settings_switched"}
HEARTBEAT = "tests.django.seedstack.shop.tasks.heartbeat"
AUDIT = "tests.django.seedstack.shop.tasks.audit"


def _slots(task_path: str, since: int) -> collections.Counter[int]:
    rows = DBTaskResult.objects.filter(backend_name="default", task_path=task_path)
    stamps = [row.args_kwargs["kwargs"]["timestamp"] for row in rows]
    return collections.Counter(s for s in stamps if s >= since)


def test_two_seed_workers_fire_each_per_second_slot_once(workers: WorkerProcesses) -> None:
    started = int(time.time()) + 1
    procs = [workers.start("concurrent_worker", env=SEED) for _ in range(2)]

    def covered() -> bool:
        for proc in procs:
            assert proc.process.poll() is None, proc.output()
        slots = _slots(HEARTBEAT, started)
        return len(slots) >= 11 and max(slots) - min(slots) >= 10

    wait_for(covered, 60, "ten seconds of per-second heartbeat slots")
    for proc in procs:
        proc.signal(signal.SIGTERM)
    for proc in procs:
        assert proc.wait() == 0, proc.output()
    slots = _slots(HEARTBEAT, started)
    assert set(slots.values()) == {1}, slots  # once per slot across both processes
    first, last = min(slots), max(slots)
    assert sorted(slots) == list(range(first, last + 1)), slots  # none lost
    done = DBTaskResult.objects.filter(task_path=HEARTBEAT, status="SUCCESSFUL")
    assert {r.return_value for r in done} >= set(range(first, last - 2))
    audited = DBTaskResult.objects.filter(task_path=AUDIT, status="SUCCESSFUL").first()
    assert audited is not None
    assert audited.return_value["source"] == "seed" and "timestamp" in audited.return_value
    for proc in procs:  # the seed's startup line, at the seed's defaults
        assert "Starting concurrent worker (concurrency=3, queue=default)" in proc.output()


def test_the_switched_seed_project_is_migrated_and_checks_clean(workers: WorkerProcesses) -> None:
    """Steps 4 and 5 of docs/django.md's switch: migrate (already applied: nothing to do) and
    check (no E006/E007: the seed's periodic tasks are schedulable, no rival commands)."""
    _seed(workers, "migrate", "--check")  # exit 0: every migration applied
    assert "no issues" in _seed(workers, "check")


def test_a_schedule_that_always_fails_does_not_stop_the_seed_worker(
    workers: WorkerProcesses,
) -> None:
    """Every enqueue of the heartbeat (registered first) is refused by a project's receiver:
    the django-tasks-db worker logs it, retries it, and the audit schedule after it and the
    worker go on (a failing schedule exited the worker)."""
    started = int(time.time()) + 1
    proc = workers.start("concurrent_worker", env={**SEED, "SEEDSTACK_REFUSE": HEARTBEAT})

    def audited() -> bool:
        assert proc.process.poll() is None, proc.output()  # still running
        return len(_slots(AUDIT, started)) >= 3

    wait_for(audited, 60, "three audit slots beside a schedule that always fails")
    proc.signal(signal.SIGTERM)
    assert proc.wait() == 0, proc.output()
    assert not _slots(HEARTBEAT, started)  # refused: no row, its claims given back
    assert "heartbeat (* * * * * *) could not be deferred; retrying in" in proc.output()


def test_a_switch_that_skipped_migrate_stops_the_worker_saying_so(
    workers: WorkerProcesses, tmp_path: Any
) -> None:
    """Step 4 forgotten: django-tasks-db's table is there, skiplock's slot ledger is not. The
    worker stops at once naming the command to run (it served tasks and logged a traceback
    for every slot, forever, with ``manage.py check`` clean)."""
    from tests.django.project.settings import KIND

    if KIND == "postgres":
        fresh = {"SKIPLOCK_DJANGO_SCHEMA": f"rev_unmigrated_{os.getpid()}"}
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE SCHEMA "{fresh["SKIPLOCK_DJANGO_SCHEMA"]}"')
    else:
        fresh = {"SKIPLOCK_DJANGO_SQLITE": str(tmp_path / "unmigrated.sqlite3")}
    env = {**SEED, **fresh}
    try:
        _seed(workers, "migrate", "django_tasks_database", env=env)  # the seed's tables only
        proc = workers.start("concurrent_worker", env=env)
        assert proc.wait(60) != 0, proc.output()
        assert "not migrated" in proc.output() and "manage.py migrate" in proc.output()
    finally:
        if KIND == "postgres":
            with connection.cursor() as cursor:
                cursor.execute(f'DROP SCHEMA "{fresh["SKIPLOCK_DJANGO_SCHEMA"]}" CASCADE')


def _seed(workers: WorkerProcesses, *args: str, env: dict[str, str] = SEED) -> str:
    """One ``manage.py`` command of the seed-stack project; its output (it must succeed)."""
    proc = workers.start(*args, env=env)
    assert proc.wait(60) == 0, proc.output()
    return proc.output()


ENQUEUE = """
import json
from tests.django.seedstack.shop import tasks
print(json.dumps([tasks.add.enqueue(2, 3).id, tasks.explode.enqueue().id]))
"""
ENQUEUE_MORE = """
import json
from tests.django.seedstack.shop import tasks
print(json.dumps(tasks.add.enqueue(4, 5).id))
"""
RESOLVE = """
import json
from django.tasks import default_task_backend
out = {}
for old in %s:
    r = default_task_backend.get_result(old)
    out[old] = [r.id, str(r.status), r.return_value if str(r.status) == "SUCCESSFUL" else None,
                r.errors[0].exception_class_path if r.errors else None, r.args]
from tests.django.seedstack.shop import tasks
out["via-task"] = tasks.add.get_result(%r).return_value  # the seed's own @task object
print(json.dumps(out))
"""


def test_the_seed_projects_rows_move_and_their_old_ids_resolve(workers: WorkerProcesses) -> None:
    import json

    ran, failed = json.loads(_seed(workers, "shell", "-c", ENQUEUE).splitlines()[-1])
    _seed(workers, "concurrent_worker", "--burst", "--no-scheduler", "--interval=0.1")
    ready = json.loads(_seed(workers, "shell", "-c", ENQUEUE_MORE).splitlines()[-1])
    rows = DBTaskResult.objects.filter(backend_name="default")
    before = collections.Counter(str(s) for s in rows.values_list("status", flat=True))
    assert DBTaskResult.objects.get(id=ran).status == "SUCCESSFUL"

    preview = _seed(workers, "import_tasks_db", "--to=skiplock", "--dry-run")
    expected = sum(before.values())
    assert f"would move {expected} rows of 'default' to 'skiplock'" in preview, preview
    assert rows.count() == expected  # a dry run writes nothing

    output = _seed(workers, "import_tasks_db", "--to=skiplock")
    assert f"moved {expected} rows of 'default' to 'skiplock'" in output, output
    assert not rows.exists()

    ids = [ran, failed, ready]  # read once the project's default backend is skiplock's
    script = RESOLVE % (json.dumps(ids), ran)
    resolved = json.loads(_seed(workers, "shell", "-c", script, env=SWITCHED).splitlines()[-1])
    assert resolved[ran] == [ran, "SUCCESSFUL", 5, None, [2, 3]]
    assert resolved[failed][:2] == [failed, "FAILED"]
    assert resolved[failed][3] == "builtins.RuntimeError"
    assert resolved[ready] == [ready, "READY", None, None, [4, 5]]
    assert resolved["via-task"] == 5
    again = _seed(workers, "import_tasks_db", "--to=skiplock")
    assert "moved 0 rows" in again  # nothing left: running it twice moves nothing twice
