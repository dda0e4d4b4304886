"""``manage.py prune_task_results [--backend ALIAS] [--dry-run]``: delete now the results past
the backend's retention (``result_retention``/``dead_retention``, see ``retention.py``), or,
with ``--dry-run``, say how many would go and delete nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from .....errors import ConfigurationError, SchemaError
from ...retention import retention_of


class Command(BaseCommand):  # type: ignore[misc]
    help = "Delete finished task results past the backend's retention (--dry-run: count only)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--backend", default="default", help="A SkiplockBackend's alias.")
        parser.add_argument("--dry-run", action="store_true", help="Count, delete nothing.")

    def handle(self, *args: Any, **opts: Any) -> None:
        from django.tasks import task_backends

        from ...backend import SkiplockBackend

        alias = opts["backend"]
        known = {name: task_backends[name] for name in task_backends}
        backend = known.get(alias)
        if not isinstance(backend, SkiplockBackend):
            valid = [name for name, b in known.items() if isinstance(b, SkiplockBackend)]
            raise CommandError(
                f"--backend: {alias!r} is not a SkiplockBackend (valid: {', '.join(valid)})"
            )
        try:
            finished_s, dead_s = retention_of(backend.options)
        except ConfigurationError as exc:
            raise CommandError(f"TASKS[{alias!r}]['OPTIONS']: {exc}") from exc
        app = backend.app
        try:  # an unmigrated database: the one line saying to migrate, not a traceback
            app.run_sync(app.check_schema())
        except SchemaError as exc:
            from ...worker import migrate_hint

            raise CommandError(migrate_hint(backend, exc)) from exc
        if opts["dry_run"]:
            finished, dead = self._count(backend.database, finished_s, dead_s)
            self.stdout.write(
                f"would delete {finished} finished result(s) older than {finished_s:g}s and "
                f"{dead} failed result(s) older than {dead_s:g}s (nothing deleted: --dry-run)"
            )
            return
        deleted = app.run_sync(app.prune(finished_age_s=finished_s, dead_age_s=dead_s))
        self.stdout.write(f"deleted {deleted} result(s) past retention")

    def _count(self, database: str, finished_s: float, dead_s: float) -> tuple[int, int]:
        from ...models import Job

        now = datetime.now(UTC)
        jobs = Job.objects.using(database)
        finished = jobs.filter(
            state__in=("succeeded", "cancelled"),
            finished_at__lt=now - timedelta(seconds=finished_s),
        ).count()
        dead = jobs.filter(state="dead", finished_at__lt=now - timedelta(seconds=dead_s)).count()
        return finished, dead
