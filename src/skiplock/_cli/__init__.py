"""The ``skiplock`` command: a shell over the Python API (click), one module per group.

``worker`` (with ``migrate``) runs jobs, ``cron`` (with ``scheduler``) shows and runs cron
schedules, ``queue``, ``task``, ``job`` and ``dead`` are what a person does to queues and jobs,
``stats``, ``health`` and ``workers`` tell whether the queues keep up, ``prune`` applies the
retention now, and ``dashboard`` serves the same on the
web (the ``dashboard`` extra).
Every command reports failures the same way (``support.CliError``: one line, exit 1 or 2).
"""

from __future__ import annotations

import click

from .cron import cron, scheduler_command
from .dashboard import dashboard_command, hash_password_command
from .dead import dead
from .health import health
from .job import job
from .prune import prune_command
from .queue import queue
from .stats import stats_command
from .support import Group
from .task import task
from .worker import migrate, run_worker, worker
from .workers import workers_command

__all__ = ["main", "run_worker"]


@click.group(cls=Group)
@click.version_option(package_name="skiplock")
def main() -> None:
    """skiplock: durable background jobs in your own PostgreSQL or SQLite database."""


for _command in (
    migrate,
    worker,
    workers_command,
    scheduler_command,
    cron,
    queue,
    task,
    job,
    dead,
    stats_command,
    health,
    prune_command,
    dashboard_command,
    hash_password_command,
):
    main.add_command(_command)
