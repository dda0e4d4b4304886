"""Result retention is a setting with a prune command (``--dry-run`` counts, deletes nothing)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from skiplock.contrib.django.models import Job
from skiplock.contrib.django.retention import retention_of

from .processes import WorkerProcesses
from .project.demo import tasks


def _prune(*options: str) -> str:
    out = io.StringIO()
    call_command("prune_task_results", *options, stdout=out)
    return out.getvalue()


def test_prune_deletes_only_what_is_past_retention_and_dry_run_deletes_nothing(
    run_worker: Any,
) -> None:
    old_ok, old_dead = tasks.add.enqueue(1, 1), tasks.explode.enqueue("old")
    fresh = tasks.add.enqueue(2, 2)
    run_worker()
    long_ago = datetime.now(UTC) - timedelta(days=40)
    Job.objects.filter(id__in=[int(old_ok.id), int(old_dead.id)]).update(finished_at=long_ago)
    before = Job.objects.count()

    said = _prune("--dry-run")
    assert "would delete 1 finished result(s)" in said and "1 failed result(s)" in said
    assert Job.objects.count() == before

    assert "deleted 2 result(s)" in _prune()
    left = set(Job.objects.values_list("id", flat=True))
    assert int(fresh.id) in left
    assert not {int(old_ok.id), int(old_dead.id)} & left


def test_retention_is_read_from_the_backend_options() -> None:
    assert retention_of({}) == (7 * 86400.0, 30 * 86400.0)
    assert retention_of({"result_retention": 3600, "dead_retention": 7200}) == (3600.0, 7200.0)
    with pytest.raises(Exception, match="result_retention"):
        retention_of({"result_retention": -1})


def test_a_bad_retention_is_a_check_error() -> None:
    from django.core import checks

    tasks_setting = {
        "default": {
            "BACKEND": "skiplock.contrib.django.SkiplockBackend",
            "OPTIONS": {"result_retention": "a week"},
        }
    }
    with override_settings(TASKS=tasks_setting):
        from django.tasks import task_backends

        errors = task_backends["default"].check()
    assert any("result_retention" in e.msg for e in errors if isinstance(e, checks.Error))


def test_prune_refuses_a_backend_that_is_not_skiplocks() -> None:
    with pytest.raises(CommandError, match="not a SkiplockBackend"):
        _prune("--backend=tasksdb")


@pytest.mark.parametrize("options", [(), ("--dry-run",)])
def test_prune_on_an_unmigrated_database_says_to_migrate(
    workers: WorkerProcesses, tmp_path: Path, options: tuple[str, ...]
) -> None:
    empty = str(tmp_path / "unmigrated.sqlite3")
    proc = workers.start(
        "prune_task_results", "--backend=jobs", *options, env={"SKIPLOCK_DJANGO_JOBS_SQLITE": empty}
    )
    assert proc.wait(60) != 0
    output = proc.output()
    assert "manage.py migrate --database=jobs" in output, output
    assert "Traceback" not in output, output  # one line, not a traceback
