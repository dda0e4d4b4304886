"""``manage.py task_worker``: the sequential worker (one task at a time), with the scheduler
unless ``--no-scheduler`` and Django's autoreloader when ``--reload`` (default: ``DEBUG``).

Every other option is ``concurrent_worker``'s and goes to the same machinery; under the
reloader the worker and its scheduler run only in the reloader's child process, never in the
parent that watches files.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.conf import settings
from django.utils import autoreload

from ...worker import worker_queue_names
from .concurrent_worker import Command as ConcurrentWorker


class Command(ConcurrentWorker):
    help = "Run tasks one at a time (concurrent_worker with concurrency 1, plus --reload)."
    sequential = True

    def add_arguments(self, parser: Any) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--reload",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="Restart on code changes (default: settings.DEBUG).",
        )

    def _banner(self, opts: dict[str, Any]) -> None:
        """The seed's startup lines."""
        queue = ",".join(worker_queue_names(queue_names=opts["queue_names"]))
        self.stdout.write(f"Starting task worker for queue: {queue}")
        if opts["scheduler"]:
            every = f"{opts['scheduler_interval']:g}"
            self.stdout.write(f"Periodic scheduler running (every {every}s)")

    def _run(self, opts: dict[str, Any]) -> None:
        reload = settings.DEBUG if opts["reload"] is None else opts["reload"]
        if reload and not opts["burst"]:
            autoreload.run_with_reloader(super()._run, opts)
        else:
            super()._run(opts)
