"""``manage.py import_tasks_db`` at its edges (the move itself runs on the seed-stack project,
``test_seed_stack.py``): which aliases it takes, and what a dry run reports and leaves."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_tasks_db.models import DBTaskResult

from .project.demo import tasks


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("import_tasks_db", *args, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from=default"], "--from: 'default' is a SkiplockBackend, not a django_tasks_db"),
        (["--from=nope"], "--from: unknown backend 'nope'"),
        (["--from=tasksdb"], "--to: name the SkiplockBackend alias to move to (TASKS has 2"),
        (["--from=tasksdb", "--to=tasksdb"], "--to: 'tasksdb' is not a SkiplockBackend alias"),
    ],
)
def test_the_aliases_are_checked(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        run(*args)


def test_a_dry_run_counts_says_what_stays_and_writes_nothing() -> None:
    on_db = tasks.add.using(backend="tasksdb")
    running, gone, movable = on_db.enqueue(1, 2), on_db.enqueue(3, 4), on_db.enqueue(5, 6)
    DBTaskResult.objects.filter(id=running.id).update(status="RUNNING")
    DBTaskResult.objects.filter(id=gone.id).update(task_path="tests.django.nowhere.gone")
    before = DBTaskResult.objects.filter(backend_name="tasksdb").count()
    out = run("--from=tasksdb", "--to=default", "--dry-run")
    assert "would move" in out and "rows of 'tasksdb' to 'default'" in out
    assert "RUNNING rows not moved: stop the workers of 'tasksdb'" in out
    assert f"not moved, its task cannot be imported: {gone.id} (tests.django.nowhere.gone" in out
    assert DBTaskResult.objects.filter(backend_name="tasksdb").count() == before
    assert DBTaskResult.objects.filter(id=movable.id).exists()  # counted, not moved
    DBTaskResult.objects.filter(id__in=[running.id, gone.id, movable.id]).delete()
