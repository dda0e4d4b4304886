"""``manage.py concurrent_worker``: a concurrent worker on a SkiplockBackend or a django-tasks-db
DatabaseBackend (see ``worker.py``), in one process or N supervised ones (``processes.py``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ....._worker.supervisor import PROCESSES_PER_CPU, too_many_processes, watch_supervisor
from .....errors import SchemaError
from ... import worker as worker_module
from ...processes import supervise
from ...worker import (
    DEFAULT_CONCURRENCY,
    DJANGO_LEASE_S,
    WorkerOptionError,
    check_lease,
    run_worker,
    worker_queue_names,
)

LEVELS = {0: logging.CRITICAL, 1: logging.INFO}


def _stuck_threads(opts: dict[str, Any]) -> bool:
    """Sync tasks still running on a thread after a stop (past the shutdown timeout): Python
    would join them at exit, so the command would outlive its deadline."""
    if opts["burst"]:
        return False  # ran out of work: nothing was cut short
    main = threading.main_thread()
    others = [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]
    return bool(worker_module.ABANDONED_THREADS or others)


class Command(BaseCommand):  # type: ignore[misc]
    help = "Run tasks of a skiplock or django-tasks-db task backend until SIGTERM/SIGINT."
    sequential = False

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--backend", dest="backend_name", default="default", help="Task backend alias."
        )
        if not self.sequential:
            parser.add_argument(
                "--concurrency",
                type=int,
                default=DEFAULT_CONCURRENCY,
                help=f"Tasks at once, async and sync alike (default {DEFAULT_CONCURRENCY}).",
            )
        parser.add_argument("--interval", type=float, default=1.0, help="Poll interval (s).")
        parser.add_argument(
            "--queue-name",
            action="append",
            dest="queue_names",
            help="Queue to work (repeatable, or comma-separated; * for all). "
            "Default: settings.TASK_QUEUE_NAME, else 'default'.",
        )
        parser.add_argument(
            "--scheduler-interval",
            type=float,
            default=15.0,
            help="Longest single sleep of the @periodic scheduler (s); it wakes at each slot.",
        )
        parser.add_argument(
            "--shutdown-timeout",
            type=float,
            default=30.0,
            help="On SIGTERM, seconds running tasks may finish before they are given back.",
        )
        parser.add_argument(
            "--lease",
            type=float,
            default=DJANGO_LEASE_S,
            help="Seconds a task without a timeout is leased for, plus a 30 s margin (renewed "
            "while its worker lives): how long a task whose worker died waits to run again.",
        )
        parser.add_argument(
            "--scheduler",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="Run the @periodic schedules of the backend too (default; --no-scheduler: not).",
        )
        parser.add_argument("--burst", action="store_true", help="Exit once nothing is ready.")
        parser.add_argument(
            "--processes",
            type=int,
            default=1,
            help="Worker processes under one supervisor (default 1); at most "
            f"{PROCESSES_PER_CPU} per CPU unless --force-processes.",
        )
        parser.add_argument(
            "--force-processes",
            action="store_true",
            help=f"Allow --processes above {PROCESSES_PER_CPU} per CPU.",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        self._configure_logging(opts.get("verbosity", 1))
        if opts["processes"] < 1:
            raise CommandError(f"--processes must be at least 1 (got {opts['processes']})")
        instead = (
            "Use concurrent_worker --concurrency instead"
            if self.sequential
            else "Raise --concurrency instead"
        )
        refusal = too_many_processes(opts["processes"], instead)
        if refusal and not opts["force_processes"]:
            raise CommandError(refusal)
        if opts["processes"] > 1:
            self._check(opts)  # a bad option fails once, here, not in every child
            code = supervise(self._name(), opts, opts["processes"])
            if code:
                sys.exit(code)
            return
        watch_supervisor()  # a supervised child stops, as on SIGTERM, once its supervisor is gone
        self._run(opts)

    def _name(self) -> str:
        return "task_worker" if self.sequential else "concurrent_worker"

    def _check(self, opts: dict[str, Any]) -> None:
        from ...worker import _backend, _check_numbers, _check_scheduler_interval, _queues

        try:
            backend = _backend(opts["backend_name"])
            _check_numbers(opts.get("concurrency", 1), opts["interval"], opts["shutdown_timeout"])
            _check_scheduler_interval(opts["scheduler_interval"])
            _queues(backend, worker_queue_names(queue_names=opts["queue_names"]))
            check_lease(opts["lease"])
        except WorkerOptionError as exc:
            raise CommandError(str(exc)) from exc

    def _banner(self, opts: dict[str, Any]) -> None:
        """The seed's startup line (scripts and supervisors grep for it)."""
        queue = ",".join(worker_queue_names(queue_names=opts["queue_names"]))
        concurrency = opts.get("concurrency", 1)
        self.stdout.write(f"Starting concurrent worker (concurrency={concurrency}, queue={queue})")

    def _run(self, opts: dict[str, Any]) -> None:
        self._check(opts)  # a bad option is its one error, before the line saying it started
        self._banner(opts)
        try:
            run_worker(
                opts["backend_name"],
                concurrency=opts.get("concurrency", 1),
                interval=opts["interval"],
                queue_names=worker_queue_names(queue_names=opts["queue_names"]),
                scheduler_interval=opts["scheduler_interval"],
                shutdown_timeout=opts["shutdown_timeout"],
                scheduler=opts["scheduler"],
                burst=opts["burst"],
                lease=opts["lease"],
            )
        except (WorkerOptionError, SchemaError) as exc:
            raise CommandError(str(exc)) from exc
        if _stuck_threads(opts):
            # sync tasks left running past the shutdown timeout cannot be joined: do not wait
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    def _configure_logging(self, verbosity: int) -> None:
        logger = logging.getLogger("skiplock")
        logger.setLevel(LEVELS.get(verbosity, logging.DEBUG))
        if not logger.hasHandlers():
            logger.addHandler(logging.StreamHandler(sys.stderr))
