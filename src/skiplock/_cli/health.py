"""``skiplock health APP``: exit 0 when the queues are being worked, 1 when not, for container
probes and cron checks. One line says why.

Unhealthy when no worker has beaten (registry heartbeat) within ``--max-silence`` seconds, or
when ready work is older than ``--max-backlog-age`` seconds and no worker has claimed within
``--max-silence`` (a busy worker on long jobs keeps an old backlog, and is not stuck).
"""

from __future__ import annotations

import sys
from datetime import timedelta

import click

from .._observe.stats import StatsGroup, WorkerInfo
from .output import echo_json, json_option
from .support import Seconds, app_command, app_for, run_async

DEFAULT_MAX_BACKLOG_AGE_S = 300.0
DEFAULT_MAX_SILENCE_S = 60.0


def claimed_ago_s(worker: WorkerInfo) -> float | None:
    """Seconds since the worker last claimed, by the database clock (None: never)."""
    if worker.last_claim_at is None:
        return None
    return worker.silent_s + (worker.heartbeat_at - worker.last_claim_at) / timedelta(seconds=1)


def problems(
    total: StatsGroup, workers: list[WorkerInfo], max_backlog_age_s: float, max_silence_s: float
) -> list[str]:
    """Why the queues are not being worked (empty: healthy)."""
    beating = [w for w in workers if w.silent_s <= max_silence_s]
    if not beating:
        return [f"no worker has heartbeated within {max_silence_s:g}s"]
    if total.backlog_age_s <= max_backlog_age_s:
        return []
    claims = [a for a in map(claimed_ago_s, beating) if a is not None]
    if claims and min(claims) <= max_silence_s:
        return []
    return [
        f"ready work is {total.backlog_age_s:.0f}s old (> {max_backlog_age_s:g}s) and no worker "
        f"has claimed within {max_silence_s:g}s"
    ]


@app_command(None, "health")
@click.option(
    "--max-backlog-age",
    type=Seconds(0),
    default=DEFAULT_MAX_BACKLOG_AGE_S,
    show_default=True,
    help="Seconds ready work may wait while no worker claims.",
)
@click.option(
    "--max-silence",
    type=Seconds(0),
    default=DEFAULT_MAX_SILENCE_S,
    show_default=True,
    help="Seconds since some worker's last heartbeat (and, with old work, its last claim).",
)
@json_option
def health(
    app_spec: str, url: str | None, max_backlog_age: float, max_silence: float, as_json: bool
) -> None:
    """Exit 0 if APP's queues are being worked, else 1 and say why."""
    app = app_for(app_spec, url)

    async def read() -> tuple[StatsGroup, list[WorkerInfo]]:
        return (await app.stats(window_s=60)).total, await app.workers()

    total, workers = run_async(app, read)
    found = problems(total, workers, max_backlog_age, max_silence)
    if as_json:
        echo_json(
            {
                "healthy": not found,
                "problems": found,
                "workers_beating": sum(w.silent_s <= max_silence for w in workers),
                "ready": total.ready,
                "backlog_age_s": total.backlog_age_s,
            }
        )
        sys.exit(1 if found else 0)
    if found:
        click.echo(f"unhealthy: {'; '.join(found)}", err=True)
        sys.exit(1)
    beating = sum(w.silent_s <= max_silence for w in workers)
    click.echo(f"healthy: {beating} worker(s) beating, backlog age {total.backlog_age_s:.0f}s")
