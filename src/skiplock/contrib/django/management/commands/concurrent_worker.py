"""``manage.py concurrent_worker``: skiplock's Worker on a SkiplockBackend (see ``worker.py``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...worker import WorkerOptionError, run_worker


class Command(BaseCommand):  # type: ignore[misc]
    help = "Run skiplock's worker on a skiplock task backend until SIGTERM/SIGINT."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--backend", default="default", help="Task backend alias.")
        parser.add_argument("--concurrency", type=int, default=10)
        parser.add_argument("--interval", type=float, default=1.0, help="Poll interval (s).")
        parser.add_argument("--queue-name", action="append", dest="queue_names")
        parser.add_argument("--shutdown-timeout", type=float, default=30.0)
        parser.add_argument("--no-scheduler", action="store_true")
        parser.add_argument("--burst", action="store_true", help="Exit once nothing is ready.")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            run_worker(
                opts["backend"],
                concurrency=opts["concurrency"],
                interval=opts["interval"],
                queue_names=opts["queue_names"],
                shutdown_timeout=opts["shutdown_timeout"],
                scheduler=not opts["no_scheduler"],
                burst=opts["burst"],
            )
        except WorkerOptionError as exc:
            raise CommandError(str(exc)) from exc
