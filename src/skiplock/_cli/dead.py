"""``skiplock dead ...``: review dead jobs, requeue (attempts reset) or discard them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from .._app import App
from .._job import JobFilter, JobRecord, JobState
from .job import echo_job, who_option
from .support import LIMIT, CliError, app_command, app_for, run_async


def filter_options(fn: Any) -> Any:
    for option in reversed(
        [
            click.argument("ids", nargs=-1, type=click.IntRange(min=1, max=2**63 - 1)),
            click.option("--task", "task_name", help="Only this task."),
            click.option("--queue", "queue_name", help="Only this queue."),
            click.option("--error", help="Only errors containing this text (any case)."),
            click.option("--since", type=click.DateTime(), help="Died at or after (UTC)."),
            click.option("--until", type=click.DateTime(), help="Died before (UTC)."),
            click.option(
                "--limit",
                type=LIMIT,
                help="At most this many, the oldest first (list, requeue and discard alike). "
                "[default: 100, or as many as the ids named]",
            ),
        ]
    ):
        fn = option(fn)
    return fn


def _filter(
    ids: tuple[int, ...],
    task_name: str | None,
    queue_name: str | None,
    error: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int | None,
) -> JobFilter:
    return JobFilter(
        ids=ids or None,
        task=task_name,
        queue=queue_name,
        error=error,
        since=since.replace(tzinfo=UTC) if since else None,
        until=until.replace(tzinfo=UTC) if until else None,
        limit=limit if limit is not None else max(len(ids), 100),
    )


@click.group()
def dead() -> None:
    """Review dead jobs: list, requeue (attempts reset) or discard them."""


@app_command(dead, "list")
@filter_options
def dead_list(app_spec: str, url: str | None, **filters: Any) -> None:
    """Dead jobs matching the filter, oldest first: the ones requeue and discard act on with
    the same filter and --limit."""
    app = app_for(app_spec, url)
    where = _filter(**filters)
    jobs, total = run_async(app, lambda: _listed(app, where))
    for j in jobs:
        echo_job(j, full=False)
    if total > len(jobs):
        click.echo(f"showing {len(jobs)} of {total} dead jobs; --limit to see more")
    else:
        click.echo(f"{len(jobs)} dead jobs")


async def _listed(app: App, where: JobFilter) -> tuple[list[JobRecord], int]:
    jobs = await app.list_jobs(JobState.DEAD, where, oldest_first=True)
    total = len(jobs) if len(jobs) < where.limit else await app.count_jobs(JobState.DEAD, where)
    return jobs, total


async def _more(app: App, where: JobFilter, kept: int) -> str:
    """What a limited action left: the dead jobs still matching beyond those it kept dead."""
    more = await app.count_jobs(JobState.DEAD, where) - kept
    return f"; {more} more match (--limit {where.limit}: run again or raise it)" if more else ""


@app_command(dead, "requeue")
@filter_options
@who_option
def dead_requeue(app_spec: str, url: str | None, who: str, **filters: Any) -> None:
    """Requeue dead jobs (by id, or by filter) with attempts reset.

    A dead job whose unique key a live job holds stays dead, and is reported as skipped."""
    app, where = _target(app_spec, url, filters)
    ids, held, more, dead_now = run_async(app, lambda: _requeue(app, where, who))
    click.echo(f"requeued {len(ids)} jobs: {ids}{more}")
    problems = []
    if held:
        problems.append(f"skipped {len(held)} jobs, a live job holds their unique key: {held}")
    missing = sorted(set(where.ids or ()) - set(ids) - dead_now)
    if missing:
        problems.append(f"not requeued: not dead, or unknown: {missing}")
    if problems:
        raise CliError("; ".join(problems))


async def _requeue(
    app: App, where: JobFilter, who: str
) -> tuple[list[int], list[int], str, set[int]]:
    """The ids requeued, the dead jobs among those picked that stayed dead (their unique key
    is held: the one reason ``requeue_dead`` leaves a picked dead job alone), what more
    matches beyond the limit, and which of the ids named are still dead."""
    matched = {j.id for j in await app.list_jobs(JobState.DEAD, where, oldest_first=True)}
    ids = await app.requeue_dead(where, who=who)
    held = sorted(await _dead_now(app, tuple(sorted(matched - set(ids)))))
    return ids, held, await _more(app, where, len(held)), await _dead_now(app, where.ids)


async def _dead_now(app: App, ids: tuple[int, ...] | None) -> set[int]:
    """Which of ``ids`` are dead now: left by the limit or a held key, not missing."""
    if not ids:
        return set()
    still = await app.list_jobs(JobState.DEAD, JobFilter(ids=ids, limit=len(ids)))
    return {j.id for j in still}


@app_command(dead, "discard")
@filter_options
@who_option
def dead_discard(app_spec: str, url: str | None, who: str, **filters: Any) -> None:
    """Discard dead jobs (by id, or by filter): they become cancelled, kept until retention."""
    app, where = _target(app_spec, url, filters)
    ids, more, dead_now = run_async(app, lambda: _discard(app, where, who))
    click.echo(f"discarded {len(ids)} jobs: {ids}{more}")
    missing = sorted(set(where.ids or ()) - set(ids) - dead_now)
    if missing:
        raise CliError(f"not discarded: not dead, or unknown: {missing}")


async def _discard(app: App, where: JobFilter, who: str) -> tuple[list[int], str, set[int]]:
    ids = await app.discard_dead(where, who=who)
    return ids, await _more(app, where, 0), await _dead_now(app, where.ids)


def _target(app_spec: str, url: str | None, filters: dict[str, Any]) -> tuple[App, JobFilter]:
    where = _filter(**filters)
    if where == JobFilter(limit=where.limit):
        raise click.UsageError("name job ids or a filter (--task, --queue, --error, --since)")
    return app_for(app_spec, url), where
