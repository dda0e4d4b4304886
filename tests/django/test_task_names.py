"""A job row's task name is resolved only against the Django tasks registered in this process,
never imported by the name the row holds (issue 22 low 12): whoever can write a row must not
choose a module for the worker or a view calling ``get_result`` to import."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from django.tasks.exceptions import TaskResultDoesNotExist

import skiplock

from .processes import WorkerProcesses
from .project.demo import tasks

FOREIGN = "tests.django.project.sideeffect.boom"


def _insert_row_naming(url: str, name: str) -> int:
    """A job naming ``name``, written by a plain skiplock app on the backend's database."""

    async def insert() -> int:
        other = skiplock.App(url)

        @other.task(name=name)
        async def anything() -> None:
            pass

        try:
            return (await anything.aenqueue()).id
        finally:
            await other.close()

    return asyncio.run(insert())


def test_a_worker_never_imports_a_module_a_job_row_names(backend: Any, run_worker: Any) -> None:
    assert "tests.django.project.sideeffect" not in sys.modules
    job_id = _insert_row_naming(backend.app.url, FOREIGN)
    run_worker()
    assert "tests.django.project.sideeffect" not in sys.modules
    record = backend.app.run_sync(backend.app.get_job(job_id))
    assert record.state.value == "dead"
    assert f"unknown task {FOREIGN!r}" in str(record.errors)


def test_get_result_never_imports_a_module_a_job_row_names(backend: Any) -> None:
    job_id = _insert_row_naming(backend.app.url, FOREIGN)
    with pytest.raises(TaskResultDoesNotExist, match="not a registered task"):
        backend.get_result(str(job_id))
    assert "tests.django.project.sideeffect" not in sys.modules


def test_a_registered_task_still_resolves_on_a_fresh_thread_s_backend(run_worker: Any) -> None:
    # Django's backends are per thread: the worker's may not have seen the task registered.
    result = tasks.add.enqueue(2, 3)
    run_worker()
    result.refresh()
    assert result.return_value == 5


def test_a_tasks_module_that_fails_to_import_stops_the_worker_with_that_error(
    workers: WorkerProcesses,
) -> None:
    """Issue 21 asked that a task whose module fails to import show that ImportError, not
    "unknown task". With names resolved only against registered tasks (issue 22), the worker
    imports every app's ``tasks`` module when it starts: one that fails stops it there, with
    the ImportError and its traceback, before any job is claimed and failed as unknown."""
    proc = workers.start(
        "concurrent_worker",
        "--burst",
        env={"SKIPLOCK_DJANGO_EXTRA_APPS": "tests.django.project.brokentasks"},
    )
    assert proc.wait(60) != 0
    output = proc.output()
    assert "ModuleNotFoundError" in output and "no_such_module" in output, output
    assert "brokentasks/tasks.py" in output, output  # the traceback names the broken module
