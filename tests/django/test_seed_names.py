"""The seed's names, signatures and defaults (issue 21 §2): a django-tasks-concurrent project
changes ``django_tasks_concurrent`` to ``skiplock.contrib.django`` in its imports and runs
unchanged. Every public name the spec lists (its C1 table) is importable from the same
module name, with the seed's parameter names and defaults."""

from __future__ import annotations

import importlib
import inspect
import io
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from .processes import WorkerProcesses
from .project.demo import tasks

SEED_NAMES = {  # seed module -> names it exports there (spec C1)
    "": [
        "ConcurrentWorker",
        "run_worker",
        "run_worker_async",
        "WorkerOptions",
        "periodic",
        "PeriodicTask",
        "registered_periodic_tasks",
        "install_resilient_run",
    ],
    ".worker": ["ConcurrentWorker", "run_worker", "run_worker_async", "WorkerOptions"],
    ".periodic_tasks": ["periodic", "PeriodicTask", "registered_periodic_tasks", "PERIODIC_TASKS"],
    ".db_worker": ["install_resilient_run", "RECONNECT_MAX_BACKOFF_SECONDS"],
    ".scheduler": [
        "defer_periodic_tasks",
        "defer_one",
        "prune_periodic_defers",
        "seconds_until_next_slot",
        "defer_periodic_forever",
        "run_scheduler_thread",
        "max_delay_seconds",
        "DEFAULT_MAX_DELAY_SECONDS",
        "DEFER_RETENTION_DAYS",
        "TICK_MARGIN_SECONDS",
    ],
    ".models": ["PeriodicDefer", "PeriodicDeferManager"],
    ".admin": ["PeriodicDeferAdmin"],
}

SIGNATURES = {  # (module, name) -> the seed's parameters, in order, with their defaults
    ("", "run_worker"): {
        "concurrency": 3,
        "interval": 1.0,
        "queue_name": "",
        "backend_name": "default",
        "scheduler_interval": 15.0,
    },
    ("", "run_worker_async"): {
        "concurrency": 3,
        "interval": 1.0,
        "queue_name": "",
        "backend_name": "default",
        "scheduler_interval": 15.0,
    },
    ("", "periodic"): {
        "cron": inspect.Parameter.empty,
        "periodic_id": "",
        "queue_name": "",
        "task_kwargs": None,
    },
    ("", "ConcurrentWorker"): {
        "concurrency": inspect.Parameter.empty,
        "interval": inspect.Parameter.empty,
        "queue_name": inspect.Parameter.empty,
        "backend_name": "default",
        "scheduler_interval": 15.0,
    },
    (".scheduler", "defer_periodic_tasks"): {"now": None},
    (".scheduler", "defer_one"): {
        "entry": inspect.Parameter.empty,
        "now": inspect.Parameter.empty,
        "cutoff": inspect.Parameter.empty,
    },
    (".scheduler", "prune_periodic_defers"): {"now": None},
    (".scheduler", "seconds_until_next_slot"): {"now": None, "max_sleep": 15.0},
    (".scheduler", "defer_periodic_forever"): {"interval": 15.0},
    (".scheduler", "run_scheduler_thread"): {"interval": 15.0},
    (".scheduler", "max_delay_seconds"): {},
    (".db_worker", "install_resilient_run"): {"max_backoff_seconds": 30.0},
    (".models", "PeriodicDefer.objects.claim_slot"): {
        "task_name": inspect.Parameter.empty,
        "periodic_id": inspect.Parameter.empty,
        "defer_at": inspect.Parameter.empty,
        "created": inspect.Parameter.empty,
    },
    (".admin", "PeriodicDeferAdmin"): {
        "model": inspect.Parameter.empty,
        "admin_site": inspect.Parameter.empty,
    },
}


def _module(name: str) -> Any:
    return importlib.import_module("skiplock.contrib.django" + name)


def _named(module: str, name: str) -> Any:
    """``name`` in ``module``, through attributes (``PeriodicDefer.objects.claim_slot``)."""
    found = _module(module)
    for part in name.split("."):
        found = getattr(found, part)
    return found


@pytest.mark.parametrize("module", sorted(SEED_NAMES))
def test_every_public_name_of_the_seed_is_there(module: str) -> None:
    missing = [n for n in SEED_NAMES[module] if not hasattr(_module(module), n)]
    assert missing == []


@pytest.mark.parametrize(("where", "expected"), SIGNATURES.items(), ids=lambda v: str(v))
def test_the_seeds_signatures(where: tuple[str, str], expected: dict[str, Any]) -> None:
    """The seed's parameters are all there, with its defaults (extra skiplock keywords may
    follow, all optional)."""
    module, name = where
    parameters = inspect.signature(_named(module, name)).parameters
    assert {p: parameters[p].default for p in expected if p in parameters} == expected
    extra = [p for p in parameters.values() if p.name not in expected]
    assert all(p.default is not inspect.Parameter.empty for p in extra), extra


def test_the_seeds_constants_and_types() -> None:
    from skiplock.contrib.django import PeriodicTask, WorkerOptions
    from skiplock.contrib.django import scheduler as s

    assert (s.DEFAULT_MAX_DELAY_SECONDS, s.DEFER_RETENTION_DAYS, s.TICK_MARGIN_SECONDS) == (
        600,
        7,
        0.5,
    )
    assert _module(".db_worker").RECONNECT_MAX_BACKOFF_SECONDS == 30.0
    assert s.max_delay_seconds() == 600
    five = {"concurrency", "interval", "queue_name", "backend_name", "scheduler_interval"}
    assert five <= set(WorkerOptions.__annotations__)
    fields = list(PeriodicTask.__dataclass_fields__)
    assert fields == ["task", "cron", "periodic_id", "queue_name", "task_kwargs"]
    from skiplock.contrib.django.models import PeriodicDefer, PeriodicDeferManager

    assert isinstance(PeriodicDefer.objects, PeriodicDeferManager)
    seed_fields = ("task_name", "periodic_id", "defer_at", "created", "title")  # spec C12
    assert [f for f in seed_fields if not hasattr(PeriodicDefer, f)] == []


def test_periodic_task_properties_are_the_seeds() -> None:
    from skiplock.contrib.django.periodic_tasks import PERIODIC_TASKS

    path = tasks.tick.module_path
    entry = PERIODIC_TASKS[(path, "tick-every-second")]
    assert (entry.task_name, entry.key) == (path, (path, "tick-every-second"))
    assert entry.title == f"{path}[tick-every-second] (* * * * * *)"
    assert entry.bound_task is tasks.tick
    now = datetime(2030, 1, 1, 12, 0, 30, 500_000, tzinfo=UTC)
    assert entry.current_slot(now) == now.replace(microsecond=0)
    assert entry.next_slot(now) == datetime(2030, 1, 1, 12, 0, 31, tzinfo=UTC)


def test_periodic_checks_its_values_at_decoration() -> None:
    from skiplock.contrib.django import periodic

    with pytest.raises(ValueError, match="already registered as periodic with a different cron"):
        periodic(cron="*/2 * * * * *", periodic_id="tick-every-second")(tasks.tick)
    with pytest.raises(Exception, match="nowhere"):
        periodic(cron="* * * * *", queue_name="nowhere")(tasks.add)
    with pytest.raises(TypeError, match="task_kwargs must be JSON"):
        periodic(cron="* * * * *", task_kwargs={"when": datetime.now(UTC)})
    with pytest.raises(TypeError, match="must wrap a django-tasks @task"):
        periodic(cron="* * * * *")(lambda: None)


def test_concurrent_worker_has_the_seeds_defaults_and_startup_line() -> None:
    from skiplock.contrib.django.management.commands.concurrent_worker import Command

    options = Command().create_parser("manage.py", "concurrent_worker").parse_args([])
    assert (options.concurrency, options.interval, options.scheduler_interval) == (3, 1.0, 15.0)
    assert options.backend_name == "default" and options.scheduler is True
    out = io.StringIO()
    call_command("concurrent_worker", "--burst", "--no-scheduler", stdout=out)
    assert "Starting concurrent worker (concurrency=3, queue=default)" in out.getvalue()


def test_task_queue_name_is_the_default_queue() -> None:
    """The seed's TASK_QUEUE_NAME: the queue a worker works when none is named; skiplock's
    every-queue reach stays available with --queue-name='*'."""
    elsewhere = tasks.add.using(queue_name="other").enqueue(1, 1)
    here = tasks.add.enqueue(2, 2)
    with override_settings(TASK_QUEUE_NAME="other"):
        out = io.StringIO()
        call_command("concurrent_worker", "--burst", "--no-scheduler", stdout=out)
    assert "queue=other" in out.getvalue()
    elsewhere.refresh()
    here.refresh()
    assert (str(elsewhere.status), str(here.status)) == ("SUCCESSFUL", "READY")
    call_command("concurrent_worker", "--burst", "--no-scheduler", "--queue-name=*")
    here.refresh()
    assert str(here.status) == "SUCCESSFUL"


def test_task_worker_says_what_the_seed_said() -> None:
    out = io.StringIO()
    call_command("task_worker", "--burst", "--no-reload", "--scheduler-interval=5", stdout=out)
    assert "Starting task worker for queue: default" in out.getvalue()
    assert "Periodic scheduler running (every 5s)" in out.getvalue()
    with pytest.raises(Exception, match="--scheduler-interval must be a positive number"):
        call_command("concurrent_worker", "--burst", "--scheduler-interval=0")


def test_a_second_app_with_the_same_command_names_is_a_check_error(
    workers: WorkerProcesses,
) -> None:
    """django-tasks-concurrent beside skiplock: which concurrent_worker runs was decided by
    INSTALLED_APPS order, silently. Here it is an error naming both apps."""
    proc = workers.start("check", env={"SKIPLOCK_DJANGO_EXTRA_APPS": "tests.django.project.rival"})
    assert proc.wait(60) != 0
    output = proc.output()
    assert "skiplock.E007" in output, output
    assert "'tests.django.project.rival'" in output and "manage.py concurrent_worker" in output


def test_concurrent_worker_runs_until_shut_down() -> None:
    import asyncio

    from skiplock.contrib.django import ConcurrentWorker

    worker = ConcurrentWorker(concurrency=2, interval=0.05, queue_name="default")
    assert worker.worker_id.startswith("concurrent-") and len(worker.worker_id) == 43
    assert (worker.backend_name, worker.scheduler_interval, worker.running) == (
        "default",
        15.0,
        False,
    )
    result = tasks.add.enqueue(20, 22)

    async def main() -> None:
        running = asyncio.create_task(worker.run())
        while str((await tasks.add.aget_result(result.id)).status) != "SUCCESSFUL":
            await asyncio.sleep(0.05)  # the task's outcome is the event awaited
        assert worker.running
        worker.shutdown()
        await asyncio.wait_for(running, 20)

    asyncio.run(asyncio.wait_for(main(), 30))
    assert not worker.running
    result.refresh()
    assert result.return_value == 42
