"""``skiplock stats APP``: is the queue keeping up? The health numbers as tables (red where an
alert threshold is crossed; ``stats_tables``, which alone loads rich), or as JSON for scripts,
once or refreshed in place."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from .._app_observe import DEFAULT_WINDOW_S
from .._observe.stats import Stats
from .output import to_json
from .support import Down, Seconds, app_command, app_for, each_database, run_async

if TYPE_CHECKING:
    from .stats_tables import Reading

DEFAULT_ALERT_BACKLOG_AGE_S = 300.0
"""Seed 000's "backlog age above a few minutes"."""


def as_json(stats: Stats) -> str:
    return to_json(stats.as_dict())


def reading_json(reading: Reading) -> str:
    """One JSON object a database, a line each (``database`` names it; one that could not be
    read: ``{"database": NAME, "error": TEXT}``)."""
    return "\n".join(
        to_json({"database": part.database, "error": part.error})
        if isinstance(part, Down)
        else as_json(part)
        for _, part in reading
    )


@app_command(None, "stats")
@click.option("--queue", help="Only this queue.")
@click.option("--task", help="Only this task name.")
@click.option(
    "--window",
    "window_s",
    type=Seconds(0),
    default=DEFAULT_WINDOW_S,
    show_default=True,
    help="Seconds back over which rates, latencies and counts are taken (depths are now).",
)
@click.option("--json", "as_json_", is_flag=True, help="One JSON object (a line per refresh).")
@click.option(
    "--watch",
    type=Seconds(0.5),
    is_flag=False,
    flag_value=2.0,
    default=None,
    help="Refresh in place every N seconds (2 if no N) until Ctrl-C.",
)
@click.option(
    "--alert-backlog-age",
    type=Seconds(0),
    default=DEFAULT_ALERT_BACKLOG_AGE_S,
    show_default=True,
    help="Backlog age (s) shown red past this; any dead job or reclaim is red too.",
)
def stats_command(
    app_spec: str,
    url: str | None,
    queue: str | None,
    task: str | None,
    window_s: float,
    as_json_: bool,
    watch: float | None,
    alert_backlog_age: float,
) -> None:
    """Is the queue keeping up? The health numbers, per queue and per task.

    Depth, backlog age, claim latency, attempts, reclaims, dead jobs, run time and
    throughput, from APP's database."""
    app = app_for(app_spec, url)

    def read() -> Reading:
        return run_async(
            app,
            lambda: each_database(
                app,
                lambda database: app.stats(
                    queue=queue, task=task, window_s=window_s, database=database
                ),
            ),
        )

    if watch is None:
        reading = read()
        if as_json_:
            click.echo(reading_json(reading))
        else:
            from .stats_tables import Alerts, print_tables  # rich, loaded for tables only

            print_tables(reading, Alerts(alert_backlog_age))
        if any(isinstance(part, Down) for _, part in reading):
            sys.exit(1)
        return
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a watch ends
        _watch(read, watch, as_json_, alert_backlog_age)


def _watch(
    read: Callable[[], Reading], every_s: float, as_json_: bool, alert_backlog_age: float
) -> None:
    """Read and show every ``every_s`` seconds: JSON lines, or the tables redrawn in place."""
    if as_json_:
        while True:
            click.echo(reading_json(read()))
            time.sleep(every_s)
    from .stats_tables import Alerts, watch  # rich, loaded for tables only

    watch(read, every_s, Alerts(alert_backlog_age))
