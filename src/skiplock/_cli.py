"""The ``skiplock`` command: a shell over the Python API (click)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from datetime import UTC, datetime
from typing import TypeVar

import click

from ._app import App
from ._cli_admin import COMMANDS
from ._cli_support import LOOPS, configure_logging, load_app, run_async
from ._config import WorkerConfig
from ._scheduler import Scheduler
from ._worker.supervisor import supervise
from ._worker.worker import Worker
from .errors import SkiplockError

T = TypeVar("T")
log = logging.getLogger("skiplock")


@click.group()
@click.version_option(package_name="skiplock")
def main() -> None:
    """skiplock: durable background jobs in your own PostgreSQL or SQLite database."""


@main.command()
@click.argument("app_spec", metavar="APP")
def migrate(app_spec: str) -> None:
    """Create or upgrade skiplock's tables in APP's database."""
    app = load_app(app_spec)
    applied = run_async(app, app.migrate)
    click.echo(f"applied migrations {applied}" if applied else "schema already up to date")


def _queues(value: str | None) -> tuple[str, ...] | None:
    if not value:
        return None
    return tuple(q.strip() for q in value.split(",") if q.strip()) or None


@main.command()
@click.argument("app_spec", metavar="APP")
@click.option("--queues", "-q", help="Comma-separated queues to work (default: all).")
@click.option("--concurrency", "-c", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--processes", "-p", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--poll-interval", type=click.FloatRange(min=0.01), default=1.0, show_default=True)
@click.option(
    "--shutdown-timeout",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds running jobs may finish after SIGTERM before they are released.",
)
@click.option(
    "--maintenance-interval",
    type=click.FloatRange(min=0.05),
    default=5.0,
    show_default=True,
    help="Seconds between sweeps that reclaim expired leases.",
)
@click.option(
    "--claim-batch",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="The most jobs one claim statement takes.",
)
@click.option(
    "--prefetch",
    type=click.IntRange(min=0),
    default=None,
    help="Jobs claimed ahead of free slots (default: adaptive, up to --concurrency while "
    "jobs take under a second; 0: never).",
)
@click.option(
    "--loop",
    "loop_name",
    type=click.Choice(LOOPS),
    default="auto",
    show_default=True,
    help="Event loop: uvloop where installed (the skiplock[uvloop] extra), or asyncio's.",
)
@click.option("--burst", is_flag=True, help="Exit once no job is ready to run.")
@click.option(
    "--scheduler/--no-scheduler",
    default=True,
    show_default=True,
    help="Enqueue the app's cron schedules from this worker too.",
)
@click.option("--log-level", default="info", show_default=True)
def worker(
    app_spec: str,
    queues: str | None,
    concurrency: int,
    processes: int,
    poll_interval: float,
    shutdown_timeout: float,
    maintenance_interval: float,
    claim_batch: int,
    prefetch: int | None,
    loop_name: str,
    burst: bool,
    scheduler: bool,
    log_level: str,
) -> None:
    """Run APP's jobs (APP is MODULE:ATTRIBUTE, e.g. myapp.tasks:app)."""
    # Until the event loop takes signals over, a stop request means "exit before claiming".
    signal.signal(signal.SIGTERM, _exit_before_start)
    signal.signal(signal.SIGINT, _exit_before_start)
    configure_logging(log_level)
    if processes > 1:
        sys.exit(supervise(sys.argv[1:], processes))
    app = load_app(app_spec)
    config = WorkerConfig(
        queues=_queues(queues),
        concurrency=concurrency,
        poll_interval_s=poll_interval,
        shutdown_timeout_s=shutdown_timeout,
        maintenance_interval_s=maintenance_interval,
        claim_batch=claim_batch,
        prefetch=prefetch,
        scheduler=scheduler,
    )
    run_worker(app, config, burst=burst, loop=loop_name)


def run_worker(
    app: App, config: WorkerConfig, *, burst: bool = False, loop: str = "asyncio"
) -> None:
    """Run one worker in this process until SIGTERM/SIGINT (a second signal skips the drain)."""
    the_worker = Worker(app, config)

    async def work() -> None:
        running = asyncio.get_running_loop()
        log.info("event loop: %s.%s", type(running).__module__, type(running).__name__)
        for sig in (signal.SIGTERM, signal.SIGINT):
            running.add_signal_handler(sig, _on_signal, the_worker, sig)
        await the_worker.run(burst=burst)

    try:
        run_async(app, work, loop=loop)
    except* SkiplockError as group:
        log.critical("worker failed: %s", group.exceptions[0])
        sys.exit(1)
    except* Exception as group:
        log.critical("worker died", exc_info=group)
        sys.exit(1)
    logging.shutdown()
    os._exit(0)  # job threads that overran their timeout cannot be joined; do not wait for them


@main.command(name="scheduler")
@click.argument("app_spec", metavar="APP")
@click.option("--log-level", default="info", show_default=True)
def scheduler_command(app_spec: str, log_level: str) -> None:
    """Run only APP's cron scheduler (it enqueues; workers elsewhere run the jobs)."""
    signal.signal(signal.SIGTERM, _exit_before_start)
    configure_logging(log_level)
    app = load_app(app_spec)
    if not app.schedules:
        raise click.ClickException(f"{app_spec} declares no schedules")

    async def work() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await app.wait_for_database()
            await Scheduler(app, await app.backend()).run()
        log.info("scheduler stopped")

    run_async(app, work)


@main.group()
def cron() -> None:
    """Inspect cron schedules."""


@cron.command(name="list")
@click.argument("app_spec", metavar="APP")
def cron_list(app_spec: str) -> None:
    """Each schedule: expression, zone, missed policy, next three fires, last slot enqueued."""
    app = load_app(app_spec)

    async def last_slots() -> dict[str, datetime]:
        return await (await app.backend()).cron_last_slots()

    last = run_async(app, last_slots)
    now = datetime.now(UTC)
    if not app.schedules:
        click.echo("no schedules")
    for schedule in app.schedules.values():
        click.echo(f"{schedule.id}")
        click.echo(f"  task     {schedule.task.name}")
        click.echo(f"  cron     {schedule.cron.text}   zone {schedule.tz.key}")
        click.echo(
            f"  missed   {schedule.missed} (max_delay {schedule.max_delay:g}s)"
            f"   overlap {'yes' if schedule.overlap else 'no'}"
        )
        for fire in schedule.next_fires(now, 3):
            local = fire.astimezone(schedule.tz)
            click.echo(f"  next     {local:%Y-%m-%d %H:%M:%S %Z}   {fire:%Y-%m-%d %H:%M:%S} UTC")
        previous = last.get(schedule.id)
        click.echo(
            f"  last     {previous.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
            if previous
            else "  last     never"
        )


def _exit_before_start(sig: int, _frame: object) -> None:
    log.info("received %s before starting; nothing was claimed", signal.Signals(sig).name)
    sys.exit(0)


def _on_signal(the_worker: Worker, sig: int) -> None:
    log.info("received %s", signal.Signals(sig).name)
    the_worker.request_stop()


for _command in COMMANDS:
    main.add_command(_command)
