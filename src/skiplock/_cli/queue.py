"""``skiplock queue ...``: pause, resume, bound and limit queues (stored in the database)."""

from __future__ import annotations

from typing import Any

import click

from .._job import QueueInfo
from .._limits import MAX_AGING_S, MIN_AGING_S
from .output import echo_json, json_option
from .support import (
    CANNOT_RUN,
    MAX_COUNT,
    CliError,
    Group,
    app_command,
    app_for,
    bounded,
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
    listed = {q.name: q for q in run_async(app, app.queues)}
    for name in {t.queue for t in app.tasks.values()} - listed.keys():
        listed[name] = QueueInfo(name, None, None, None, False, 0, 0)  # aging_s: None
    queues = sorted(listed.values(), key=lambda info: info.name)
    if as_json:
        echo_json({"queues": [_queue_json(q) for q in queues]})
        return
    if not queues:
        click.echo("no queues")
    for q in queues:
        click.echo(
            f"{q.name:<20} pending={q.pending:<6} running={q.running:<5} claimed={q.claimed:<5} "
            f"paused={'yes' if q.paused else 'no'} max_depth={q.max_depth} "
            f"max_running={q.max_running} rate_per_s={q.rate_per_s} aging_s={q.aging_s}"
        )


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
    }


CREATE = click.option(
    "--create",
    is_flag=True,
    help="NAME may be new (no task, job or setting names it yet): set it up.",
)


@app_command(queue, "pause")
@click.argument("name")
@CREATE
def queue_pause(app_spec: str, url: str | None, name: str, create: bool) -> None:
    """Stop every worker claiming from NAME (running jobs finish).

    NAME must be known: a task of APP uses it, or a job (finished ones too) or a setting
    names it; a new name needs --create."""
    app = app_for(app_spec, url)
    run_async(app, lambda: app.pause_queue(name, create=create))
    click.echo(f"queue {name} paused")


@app_command(queue, "resume")
@click.argument("name")
@CREATE
def queue_resume(app_spec: str, url: str | None, name: str, create: bool) -> None:
    """Let workers claim from NAME again (known, or --create, as for pause)."""
    app = app_for(app_spec, url)
    run_async(app, lambda: app.resume_queue(name, create=create))
    click.echo(f"queue {name} resumed")


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
def queue_limit(
    app_spec: str,
    url: str | None,
    name: str,
    max_depth: str | None,
    max_running: str | None,
    rate: str | None,
    aging: str | None,
    create: bool,
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

    async def set_and_read() -> QueueInfo:
        await app.set_queue_limits(name, **given, create=create)
        return await app.queue_info(name)

    q = run_async(app, set_and_read)
    click.echo(
        f"queue {name}: max_depth={q.max_depth} max_running={q.max_running}"
        f" rate_per_s={q.rate_per_s} aging_s={q.aging_s}"
    )
