"""``skiplock health APP``: exit 0 when the queues are being worked, 1 when not, for container
probes and cron checks. One line says why.

Unhealthy when no worker is alive: none has beaten (registry heartbeat) within
``--max-silence`` seconds, or those that have are dead by ``_observe.liveness`` (silent past
their own limit, or, read on their machine, their process gone: a worker killed with SIGKILL
is seen dead at once, not a minute later); when a supervised worker is in a crash loop (its
slot restarted ``--max-restarts`` times in a row after crashes, none staying up a minute);
or when ready work is older than ``--max-backlog-age`` seconds and no live worker has claimed
within ``--max-silence`` (a busy worker on long jobs keeps an old backlog, and is not stuck).
"""

from __future__ import annotations

import sys
from datetime import timedelta

import click

from .._observe.liveness import CRASH_LOOP_RESTARTS, STABLE_S, dead_reason
from .._observe.stats import StatsGroup, WorkerInfo
from .output import echo, echo_json, json_option
from .support import Down, Seconds, app_command, app_for, each_database, run_async

DEFAULT_MAX_BACKLOG_AGE_S = 300.0
DEFAULT_MAX_SILENCE_S = 60.0


def claimed_ago_s(worker: WorkerInfo) -> float | None:
    """Seconds since the worker last claimed, by the database clock (None: never)."""
    if worker.last_claim_at is None:
        return None
    return worker.silent_s + (worker.heartbeat_at - worker.last_claim_at) / timedelta(seconds=1)


def alive(workers: list[WorkerInfo], max_silence_s: float) -> list[WorkerInfo]:
    """The workers that beat within ``max_silence_s`` and are not known dead."""
    return [w for w in workers if w.silent_s <= max_silence_s and dead_reason(w) is None]


def crash_loops(workers: list[WorkerInfo], max_restarts: int) -> list[WorkerInfo]:
    """The workers whose supervisor restarted their slot ``max_restarts`` times in a row (0:
    never a crash loop)."""
    return [w for w in workers if max_restarts and w.restarts_in_a_row >= max_restarts]


def problems(
    total: StatsGroup,
    workers: list[WorkerInfo],
    max_backlog_age_s: float,
    max_silence_s: float,
    max_restarts: int = CRASH_LOOP_RESTARTS,
) -> list[str]:
    """Why the queues are not being worked (empty: healthy)."""
    live = alive(workers, max_silence_s)
    if not live:
        dead = [
            f"{w.name} {dead_reason(w)}"
            for w in workers
            if w.silent_s <= max_silence_s and dead_reason(w)
        ]
        if dead:
            return [f"no live worker: {'; '.join(dead)}"]
        return [f"no worker has heartbeated within {max_silence_s:g}s"]
    found = [
        f"worker {w.name} was restarted {w.restarts_in_a_row} times in a row after crashing "
        f"(a crash loop: its supervisor's log says how each ended); healthy again once one "
        f"stays up {STABLE_S:g}s"
        for w in crash_loops(live, max_restarts)
    ]
    if total.backlog_age_s <= max_backlog_age_s:
        return found
    claims = [a for a in map(claimed_ago_s, live) if a is not None]
    if claims and min(claims) <= max_silence_s:
        return found
    return [
        *found,
        f"ready work is {total.backlog_age_s:.0f}s old (> {max_backlog_age_s:g}s) and no worker "
        f"has claimed within {max_silence_s:g}s",
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
@click.option(
    "--max-restarts",
    type=click.IntRange(min=0),
    default=CRASH_LOOP_RESTARTS,
    show_default=True,
    help="Crash restarts in a row of one supervised worker that make a crash loop (0: never).",
)
@json_option
def health(
    app_spec: str,
    url: str | None,
    max_backlog_age: float,
    max_silence: float,
    max_restarts: int,
    as_json: bool,
) -> None:
    """Exit 0 if APP's queues are being worked, else 1 and say why.

    An APP with several databases: each is read and judged on its own (its workers, its
    backlog); a problem in one, or one that cannot be read, is unhealthy, named."""
    app = app_for(app_spec, url)

    async def read(database: str) -> tuple[StatsGroup, list[WorkerInfo]]:
        stats = await app.stats(window_s=60, database=database)
        return stats.total, await app.workers(database=database)

    parts = run_async(app, lambda: each_database(app, read))
    if app.directory.several:
        _several(parts, max_backlog_age, max_silence, max_restarts, as_json)
        return
    ((_, part),) = parts  # one database: a failure has raised
    assert not isinstance(part, Down)
    total, workers = part
    found = problems(total, workers, max_backlog_age, max_silence, max_restarts)
    live = alive(workers, max_silence)
    if as_json:
        echo_json(
            {
                "healthy": not found,
                "problems": found,
                "workers_beating": len(live),
                "workers_dead": sum(
                    w.silent_s <= max_silence and dead_reason(w) is not None for w in workers
                ),
                "crash_loops": len(crash_loops(live, max_restarts)),
                "ready": total.ready,
                "backlog_age_s": total.backlog_age_s,
            }
        )
        sys.exit(1 if found else 0)
    if found:
        echo(f"unhealthy: {'; '.join(found)}", err=True)
        sys.exit(1)
    echo(f"healthy: {len(live)} worker(s) beating, backlog age {total.backlog_age_s:.0f}s")


def _several(
    parts: list[tuple[str, tuple[StatsGroup, list[WorkerInfo]] | Down]],
    max_backlog_age: float,
    max_silence: float,
    max_restarts: int,
    as_json: bool,
) -> None:
    """``health`` of an APP with several databases: each judged alone, every problem named
    with its database; healthy only if every database is."""
    found: list[str] = []
    each: list[dict[str, object]] = []
    beating, oldest = 0, 0.0
    for database, part in parts:
        if isinstance(part, Down):
            found.append(part.line())
            each.append({"database": database, "healthy": False, "problems": [part.error]})
            continue
        total, workers = part
        here = problems(total, workers, max_backlog_age, max_silence, max_restarts)
        found += [f"database {database}: {p}" for p in here]
        live = alive(workers, max_silence)
        beating += len(live)
        oldest = max(oldest, total.backlog_age_s)
        each.append(
            {
                "database": database,
                "healthy": not here,
                "problems": here,
                "workers_beating": len(live),
                "ready": total.ready,
                "backlog_age_s": total.backlog_age_s,
            }
        )
    if as_json:
        echo_json(
            {
                "healthy": not found,
                "problems": found,
                "workers_beating": beating,
                "backlog_age_s": oldest,
                "databases": each,
            }
        )
        sys.exit(1 if found else 0)
    if found:
        echo(f"unhealthy: {'; '.join(found)}", err=True)
        sys.exit(1)
    names = ", ".join(database for database, _ in parts)
    echo(f"healthy: {beating} worker(s) beating, backlog age {oldest:.0f}s (databases: {names})")
