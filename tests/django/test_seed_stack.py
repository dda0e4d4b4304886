"""A real project on the seed's stack (``tests/django/seedstack``: django-tasks-db's
``DatabaseBackend``, ``@periodic`` in ``shop/tasks.py``), switched as docs/django.md says and
run unchanged: ``manage.py concurrent_worker`` with the seed's defaults, two processes, its
per-second schedule enqueued once per slot into django-tasks-db's table."""

from __future__ import annotations

import collections
import signal
import time

from django_tasks_db.models import DBTaskResult

from .processes import WorkerProcesses, wait_for

SEED = {"DJANGO_SETTINGS_MODULE": "tests.django.seedstack.settings"}
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
