"""``skiplock queue ...``: pause, resume, bound and limit queues (stored in the database)."""

from __future__ import annotations

import sys
from typing import Any

import click

from .._job import QueueInfo
from .._limits import MAX_AGING_S, MIN_AGING_S
from .output import echo, echo_json, json_option
from .support import (
    CANNOT_RUN,
    MAX_COUNT,
    CliError,
    Down,
    Group,
    app_command,
    app_for,
    bounded,
    database_option,
    each_database,
    report_down,
    run_async,
)


@click.group(cls=Group)
def queue() -> None:
    """Pause, resume, bound and limit queues, for every worker.

    The settings are stored in the database, so every worker follows them."""


@app_command(queue, "list")
@json_option
def queue_list(app_spec: str, url: str | None, as_json: bool) -> None:
    """Each queue with its settings and live counts, idle ones (used by APP's tasks) too."""
    app = app_for(app_spec, url)
    parts = run_async(app, lambda: each_database(app, lambda name: app.queues(database=name)))
    read = {name for name, part in parts if not isinstance(part, Down)}
    listed = {(q.database, q.name): q for _, part in parts if isinstance(part, list) for q in part}
    directory = app.directory
    for name in {t.queue for t in app.tasks.values()}:
        home = directory.database_of(directory.lane_for(name))  # where its jobs go
        if home in read and not any(q == name for _, q in listed):
            listed[home, name] = QueueInfo(name, None, None, None, False, 0, 0, database=home)
    order = [name for name, _ in parts]
    queues = sorted(listed.values(), key=lambda q: (q.name, order.index(q.database)))
    down = report_down(parts, as_json=as_json)
    if as_json:
        failed = {"failed": [{"database": d.database, "error": d.error} for d in down]}
        echo_json({"queues": [_queue_json(q) for q in queues], **(failed if down else {})})
        if down:
            sys.exit(1)
        return
    if not queues:
        echo("no queues")
    several = directory.several
    for q in queues:
        where = f"database={q.database} " if several else ""
        echo(
            f"{q.name:<20} {where}pending={q.pending:<6} running={q.running:<5} "
            f"claimed={q.claimed:<5} paused={'yes' if q.paused else 'no'} "
            f"max_depth={q.max_depth} max_running={q.max_running} rate_per_s={q.rate_per_s} "
            f"aging_s={q.aging_s}"
        )
    if down:
        sys.exit(1)


def _queue_json(q: QueueInfo) -> dict[str, object]:
    """One queue of ``queue list --json`` (keys: docs/operations/cli.md)."""
    return {
        "name": q.name,
        "pending": q.pending,
        "claimed": q.claimed,
        "running": q.running,
        "paused": q.paused,
        "max_depth": q.max_depth,
        "max_running": q.max_running,
        "rate_per_s": q.rate_per_s,
        "aging_s": q.aging_s,
        "database": q.database,
    }


CREATE = click.option(
    "--create",
    is_flag=True,
    help="NAME may be new (no task, job or setting names it yet): set it up.",
)


@app_command(queue, "pause")
@click.argument("name")
@CREATE
@database_option
def queue_pause(
    app_spec: str, url: str | None, name: str, create: bool, database: str | None
) -> None:
    """Stop every worker claiming from NAME (running jobs finish).

    NAME must be known: a task of APP uses it, or a job (finished ones too) or a setting
    names it; a new name needs --create."""
    _set_paused(app_spec, url, name, create, "paused", database)


def _set_paused(
    app_spec: str, url: str | None, name: str, create: bool, done: str, only: str | None
) -> None:
    """Pause or resume NAME in every database of APP (a queue's jobs may be in any), or the
    one ``--database`` names, one line each when there are several; a database that fails
    is said and exits 1."""
    app = app_for(app_spec, url)

    async def act(database: str) -> None:
        if done == "paused":
            await app.pause_queue(name, create=create, database=database)
        else:
            await app.resume_queue(name, create=create, database=database)

    parts = run_async(app, lambda: each_database(app, act, only))
    if not app.directory.several:
        echo(f"queue {name} {done}")
        return
    for database, part in parts:
        if not isinstance(part, Down):
            echo(f"queue {name} {done} in database {database}")
    if report_down(parts):
        sys.exit(1)


@app_command(queue, "resume")
@click.argument("name")
@CREATE
@database_option
def queue_resume(
    app_spec: str, url: str | None, name: str, create: bool, database: str | None
) -> None:
    """Let workers claim from NAME again (known, or --create, as for pause)."""
    _set_paused(app_spec, url, name, create, "resumed", database)


def _limit(
    option: str,
    value: str,
    kind: type[int] | type[float],
    low: float | None = None,
    high: float = MAX_COUNT,
) -> int | float | None:
    """A bound, limit or step: a number within range (``low`` by default 0 for a count,
    1e-6 for a rate: a rate of 0 would stop the queue, which is a pause), or 'none'
    (lifted)."""
    if value.lower() == "none":
        return None
    try:
        number = kind(value)
    except ValueError as exc:
        raise CliError(f"{option} {value!r}: not a number or 'none'", CANNOT_RUN) from exc
    if low is None:
        low = 0 if kind is int else 1e-6
    return kind(bounded(option, number, low, high))


@app_command(queue, "limit")
@click.argument("name")
@click.option("--max-depth", help="Enqueue raises QueueFull past this many live jobs ('none').")
@click.option("--max-running", help="At most this many running at once, everywhere ('none').")
@click.option("--rate", help="At most this many starts per second, everywhere ('none').")
@click.option(
    "--aging",
    help="Seconds of waiting that raise a ready job's priority by one ('none': no aging).",
)
@CREATE
@database_option
def queue_limit(
    app_spec: str,
    url: str | None,
    name: str,
    max_depth: str | None,
    max_running: str | None,
    rate: str | None,
    aging: str | None,
    create: bool,
    database: str | None,
) -> None:
    """Set NAME's bound and limits: the options given ('none' lifts one); the others stay as
    they are.

    NAME must be known (as for pause); a new name needs --create."""
    given: dict[str, Any] = {}
    if max_depth is not None:
        given["max_depth"] = _limit("--max-depth", max_depth, int)
    if max_running is not None:
        given["max_running"] = _limit("--max-running", max_running, int)
    if rate is not None:
        given["rate_per_s"] = _limit("--rate", rate, float)
    if aging is not None:
        given["aging_s"] = _limit("--aging", aging, float, MIN_AGING_S, MAX_AGING_S)
    if not given:
        raise CliError(
            f"queue limit {name}: nothing to set; give --max-depth, --max-running, --rate or "
            "--aging (a number, or 'none' to lift it)",
            CANNOT_RUN,
        )
    app = app_for(app_spec, url)

    async def set_and_read(one: str) -> QueueInfo:
        await app.set_queue_limits(name, **given, create=create, database=one)
        return await app.queue_info(name, database=one)

    parts = run_async(app, lambda: each_database(app, set_and_read, database))
    for one, q in parts:
        if isinstance(q, QueueInfo):
            where = f" in database {one}" if app.directory.several else ""
            echo(
                f"queue {name}{where}: max_depth={q.max_depth} max_running={q.max_running}"
                f" rate_per_s={q.rate_per_s} aging_s={q.aging_s}"
            )
    if report_down(parts):
        sys.exit(1)
