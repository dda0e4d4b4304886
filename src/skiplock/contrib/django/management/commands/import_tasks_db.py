"""``manage.py import_tasks_db``: move a django-tasks-db backend's rows to a SkiplockBackend.

The last step of switching from the seed's stack (docs/django.md): every queued (READY) row
becomes a pending skiplock job with its arguments, queue, priority and ``run_after``; every
finished row (SUCCESSFUL, FAILED) becomes a finished job with its return value, or its
exception class path and traceback, its attempts and its times. Each moved row's id is kept
(``ImportedTask``), so ``get_result(old_id)`` on the skiplock backend still finds it. RUNNING
rows are not moved (their worker still owns them: stop the workers and run again), nor rows
whose task can no longer be imported (named in the output). ``--dry-run`` counts what would
move and writes nothing.

Rows move in batches, each in one transaction on the skiplock backend's database (and on
django-tasks-db's, when that is another one): the job, its id map entry and the deletion of
the old row commit together, so running the command again after an interruption moves only
what is left.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

BATCH = 500


class Command(BaseCommand):  # type: ignore[misc]
    help = "Move a django-tasks-db backend's queued and finished rows to a SkiplockBackend."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--from",
            dest="source",
            default="default",
            help="The django-tasks-db DatabaseBackend alias whose rows move (default: default).",
        )
        parser.add_argument(
            "--to",
            dest="target",
            default=None,
            help="The SkiplockBackend alias they move to (default: the only one in TASKS).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would move; write nothing."
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        source, target = _source(opts["source"]), _target(opts["target"])
        rows = _rows(source.alias)
        counts: collections.Counter[str] = collections.Counter()
        unimportable: list[str] = []
        for row in rows.exclude(status="RUNNING").iterator(chunk_size=BATCH):
            try:
                row.task  # noqa: B018 -- imports task_path
            except Exception as exc:
                unimportable.append(f"{row.id} ({row.task_path}: {type(exc).__name__})")
                continue
            counts[str(row.status)] += 1
        running = rows.filter(status="RUNNING").count()
        if not opts["dry_run"]:
            moved = _move(rows, target)
            if moved != counts:  # rows came or went since the count: report what moved
                counts = moved
        verb = "would move" if opts["dry_run"] else "moved"
        detail = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items())) or "none"
        self.stdout.write(
            f"{verb} {sum(counts.values())} rows of {source.alias!r} to {target.alias!r} ({detail})"
        )
        if running:
            self.stdout.write(
                f"{running} RUNNING rows not moved: stop the workers of {source.alias!r} and "
                "run this again"
            )
        for text in unimportable:
            self.stdout.write(f"not moved, its task cannot be imported: {text}")


def _source(alias: str) -> Any:
    from django.tasks import task_backends

    from ..._ledger import is_tasks_db

    if alias not in task_backends:
        raise CommandError(f"--from: unknown backend {alias!r} (valid: {_aliases()})")
    backend = task_backends[alias]
    if not is_tasks_db(backend):
        raise CommandError(
            f"--from: {alias!r} is a {type(backend).__name__}, not a "
            "django_tasks_db.DatabaseBackend"
        )
    return backend


def _target(alias: str | None) -> Any:
    from django.tasks import task_backends

    from ...backend import SkiplockBackend

    ours = [a for a in task_backends if isinstance(task_backends[a], SkiplockBackend)]
    if alias is None:
        if len(ours) != 1:
            raise CommandError(
                f"--to: name the SkiplockBackend alias to move to (TASKS has {len(ours)}: "
                f"{', '.join(ours) or 'none'})"
            )
        alias = ours[0]
    if alias not in ours:
        raise CommandError(
            f"--to: {alias!r} is not a SkiplockBackend alias (valid: {', '.join(ours) or 'none'})"
        )
    return task_backends[alias]


def _aliases() -> str:
    from django.tasks import task_backends

    return ", ".join(sorted(task_backends))


def _rows(alias: str) -> Any:
    from django_tasks_db.models import DBTaskResult

    from ..._ledger import tasks_db_database

    return DBTaskResult.objects.using(tasks_db_database()).filter(backend_name=alias)


def _move(rows: Any, target: Any) -> collections.Counter[str]:
    from django.db import transaction

    from ..._ledger import tasks_db_database

    moved: collections.Counter[str] = collections.Counter()
    left: list[Any] = []  # rows whose task cannot be imported: they stay where they are
    while True:
        with (
            transaction.atomic(using=target.database),
            transaction.atomic(using=tasks_db_database()),
        ):
            todo = rows.exclude(status="RUNNING").exclude(pk__in=left)
            batch = list(todo.order_by("enqueued_at", "id")[:BATCH])
            done = [row for row in batch if _move_one(row, target)]
            rows.filter(pk__in=[row.pk for row in done]).delete()
        left += [row.pk for row in batch if row not in done]
        for row in done:
            moved[str(row.status)] += 1
        if len(batch) < BATCH:
            return moved


def _move_one(row: Any, target: Any) -> bool:
    """One row as a skiplock job on the target's connection (in the caller's transaction)."""
    from django.db import connections

    from ...models import ImportedTask

    try:
        task = row.task.using(backend=target.alias)  # checks the queue against its QUEUES
    except Exception:
        return False  # unimportable (counted and named by the caller)
    job = target.skiplock_task(task).using(queue=task.queue_name, priority=task.priority)
    result = row.task_result
    new = job.using(run_after=task.run_after) if task.run_after else job
    prepared = new.prepare(*result.args, **result.kwargs)
    finished = str(row.status) in ("SUCCESSFUL", "FAILED")
    if finished:  # history, not a live job: it must not take or find a unique key
        prepared = dataclasses.replace(prepared, unique_key=None)
    conn = connections[target.database]
    conn.ensure_connection()
    (handle,) = target.app.enqueue_many_sync([prepared], connection=conn.connection)
    if finished:
        _finish(row, handle.id, target, conn.connection)
    ImportedTask.objects.using(target.database).create(
        old_id=str(row.id), job_id=handle.id, backend=target.alias
    )
    return True


def _finish(row: Any, job_id: int, target: Any, connection: object) -> None:
    from django.utils import timezone

    from skiplock._backends.params import JobImportOutcomeParams

    succeeded = str(row.status) == "SUCCESSFUL"
    attempts = max(1, len(row.worker_ids or []))
    finished_at = row.finished_at or timezone.now()
    errors = []
    if not succeeded:
        lines = (row.traceback or "").strip().splitlines()
        errors.append(
            {
                "attempt": attempts,
                "at": finished_at.isoformat(),
                "message": lines[-1] if lines else row.exception_class_path,
                "type": row.exception_class_path,
                "traceback": row.traceback or "",
            }
        )
    target.app.new_backend().job_import_outcome_sync(
        JobImportOutcomeParams(
            connection=connection,
            job_id=job_id,
            state="succeeded" if succeeded else "dead",
            attempt=attempts,
            created_at=row.enqueued_at,
            attempted_at=row.started_at,
            finished_at=finished_at,
            result_json=json.dumps(row.return_value) if succeeded else None,
            errors_json=json.dumps(errors),
            locked_by=(row.worker_ids or [None])[-1],
        )
    )
