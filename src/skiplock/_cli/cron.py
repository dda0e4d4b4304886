"""``skiplock scheduler`` and ``skiplock cron list``: the app's cron schedules."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from datetime import UTC, datetime
from typing import Any

import click

from .._schedule import Schedule
from .._worker.scheduler import Scheduler
from .output import echo, echo_json, json_option
from .support import (
    CANNOT_RUN,
    CliError,
    Group,
    configure_logging,
    exit_before_start,
    load_app,
    log_level_option,
    run_async,
)

log = logging.getLogger("skiplock")


@click.command(name="scheduler")
@click.argument("app_spec", metavar="APP")
@log_level_option
def scheduler_command(app_spec: str, log_level: str, log_format: str) -> None:
    """Run only APP's cron scheduler; workers elsewhere run the jobs."""
    signal.signal(signal.SIGTERM, exit_before_start)
    configure_logging(log_level, log_format)
    app = load_app(app_spec)
    if not app.schedules:
        raise CliError(f"{app_spec} declares no schedules")

    async def work() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await app.wait_for_database()
            await Scheduler(app.registry, await app.backend()).run()
        log.info("scheduler stopped")

    run_async(app, work, exit_code=CANNOT_RUN)


@click.group(cls=Group)
def cron() -> None:
    """Inspect cron schedules."""


@cron.command(name="list")
@click.argument("app_spec", metavar="APP")
@json_option
def cron_list(app_spec: str, as_json: bool) -> None:
    """Each schedule with its next three fires and last slot.

    Also its expression, zone, missed-run policy and whether runs may overlap; with several
    databases, the one it runs in (its last slot is the latest over them all)."""
    app = load_app(app_spec)
    runs = run_async(app, app.cron_last_runs)
    last = {r.schedule: r.slot for r in runs}
    if as_json:
        now = datetime.now(UTC)
        echo_json(
            {
                "schedules": [
                    {
                        **schedule_details(s, last.get(s.id), now),
                        "database": app.owner_of(s),
                    }
                    for s in app.schedules.values()
                ]
            }
        )
        return
    if not app.schedules:
        echo("no schedules")
    for schedule in app.schedules.values():
        owner = app.owner_of(schedule) if app.directory.several else None
        _echo_schedule(schedule, last.get(schedule.id), owner)


def schedule_details(
    schedule: Schedule, previous: datetime | None, now: datetime
) -> dict[str, Any]:
    """One schedule as ``cron list --json`` prints it (times UTC)."""
    return {
        "id": schedule.id,
        "task": schedule.task.name,
        "queue": schedule.queue or schedule.task.queue,
        "cron": schedule.cron.text,
        "zone": schedule.tz.key,
        "missed": schedule.missed,
        "max_delay_s": schedule.max_delay,
        "max_catchup": schedule.max_catchup,
        "overlap": schedule.overlap,
        "next_fires": [f.astimezone(UTC) for f in schedule.next_fires(now, 3)],
        "last_slot": previous.astimezone(UTC) if previous else None,
    }


def _echo_schedule(schedule: Schedule, previous: datetime | None, owner: str | None) -> None:
    """``owner``: the database its slots are claimed in (shown when the App has several;
    ``last`` is then the latest slot over them all)."""
    echo(f"{schedule.id}")
    echo(f"  task     {schedule.task.name}")
    if owner is not None:
        echo(f"  database {owner}")
    echo(f"  cron     {schedule.cron.text}   zone {schedule.tz.key}")
    echo(
        f"  missed   {schedule.missed} (max_delay {schedule.max_delay:g}s)"
        f"   overlap {'yes' if schedule.overlap else 'no'}"
    )
    for fire in schedule.next_fires(datetime.now(UTC), 3):
        local = fire.astimezone(schedule.tz)
        echo(f"  next     {local:%Y-%m-%d %H:%M:%S %Z}   {fire:%Y-%m-%d %H:%M:%S} UTC")
    echo(
        f"  last     {previous.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
        if previous
        else "  last     never"
    )
