"""``skiplock dead ...``: review dead jobs, requeue (attempts reset) or discard them."""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from .._app import App
from .._job import JobFilter, JobRecord, JobState
from .job import echo_job, echo_jobs, filter_options, job_filter, who_option
from .output import echo, json_option
from .support import CliError, Group, app_command, app_for, database_option, run_async

LIMIT_HELP = (
    "At most this many, the oldest first (list, requeue and discard alike); with job ids, "
    "as many as are named unless given."
)


def dead_filter_options(fn: Any) -> Any:
    """Job ids, or ``job list``'s filters (times compared with when a job died)."""
    fn = filter_options("that died", limit_help=LIMIT_HELP)(fn)
    fn = database_option(fn)
    return click.argument("ids", nargs=-1, type=click.IntRange(min=1, max=2**63 - 1))(fn)


def _by_database(app: App, ids: list[int]) -> dict[str, list[int]]:
    """``ids`` by the database each names, in the ids' order."""
    parts: dict[str, list[int]] = {}
    for job_id in ids:
        parts.setdefault(app.directory.name_of_id(job_id), []).append(job_id)
    return parts


def dead_filter(**filters: Any) -> JobFilter:
    """The filter a dead command means: named ids take a limit of as many as are named,
    unless ``--limit`` was given (a limit is a promise: it is kept as given)."""
    given = click.get_current_context().get_parameter_source("limit") != ParameterSource.DEFAULT
    if filters["ids"] and not given:
        filters["limit"] = max(filters["limit"], len(filters["ids"]))
    return job_filter(**filters)


@click.group(cls=Group)
def dead() -> None:
    """Review dead jobs: list, requeue or discard them.

    A requeued job starts again with its attempts reset; a discarded one is cancelled."""


@app_command(dead, "list")
@dead_filter_options
@json_option
def dead_list(
    app_spec: str, url: str | None, as_json: bool, database: str | None, **filters: Any
) -> None:
    """Dead jobs matching the filter, oldest first: the ones requeue and discard act on with
    the same filter and --limit (and --database: with several databases, each in turn, in
    the order of their ids, the limit counted over them all)."""
    app = app_for(app_spec, url)
    where = dead_filter(**filters)
    jobs, total = run_async(app, lambda: _listed(app, where, database))
    if app.directory.several and not as_json:
        parts = _by_database(app, [j.id for j in jobs])
        for name, ids in parts.items():
            echo(f"database {name}: {len(ids)} dead jobs")
            for j in jobs:
                if j.id in ids:
                    echo_job(j, full=False)
        more = f" of {total}; --limit to see more" if total > len(jobs) else ""
        echo(f"{len(jobs)} dead jobs{more}")
        return
    if total > len(jobs) and not as_json:
        for j in jobs:
            echo_job(j, full=False)
        echo(f"showing {len(jobs)} of {total} dead jobs; --limit to see more")
        return
    echo_jobs(jobs, "dead jobs", as_json)


async def _listed(app: App, where: JobFilter, database: str | None) -> tuple[list[JobRecord], int]:
    jobs = await app.list_jobs(JobState.DEAD, where, oldest_first=True, database=database)
    total = (
        len(jobs)
        if len(jobs) < where.limit
        else await app.count_jobs(JobState.DEAD, where, database=database)
    )
    return jobs, total


async def _more(app: App, where: JobFilter, kept: int, database: str | None) -> str:
    """What a limited action left: the dead jobs still matching beyond those it kept dead."""
    more = await app.count_jobs(JobState.DEAD, where, database=database) - kept
    return f"; {more} more match (--limit {where.limit}: run again or raise it)" if more else ""


async def _dead_now(app: App, ids: tuple[int, ...] | None) -> set[int]:
    """Which of ``ids`` are dead now: left by the limit or a held key, not missing."""
    if not ids:
        return set()
    still = await app.list_jobs(JobState.DEAD, JobFilter(ids=ids, limit=len(ids)))
    return {j.id for j in still}


@app_command(dead, "requeue")
@dead_filter_options
@who_option
def dead_requeue(
    app_spec: str, url: str | None, who: str, database: str | None, **filters: Any
) -> None:
    """Requeue dead jobs (by id, or by filter) with attempts reset.

    At most --limit of them, the oldest first (what dead list shows with the same filter),
    saying how many more match. A dead job whose unique key a live job holds stays dead, and
    is reported as skipped. With several databases, each in turn (or --database alone), as
    dead list shows them."""
    app, where = _target(app_spec, url, filters)
    ids, held, more, dead_now = run_async(app, lambda: _requeue(app, where, who, database))
    _said(app, "requeued", ids)
    echo(f"requeued {len(ids)} jobs: {ids}{more}")
    problems = []
    if held:
        problems.append(f"skipped {len(held)} jobs, a live job holds their unique key: {held}")
    missing = sorted(set(where.ids or ()) - set(ids) - dead_now)
    if missing:
        problems.append(f"not requeued: not dead, or unknown: {missing}")
    if problems:
        raise CliError("; ".join(problems))


def _said(app: App, done: str, ids: list[int]) -> None:
    """Several databases: what was done in each, a line a database."""
    if app.directory.several:
        for name, part in _by_database(app, ids).items():
            echo(f"database {name}: {done} {len(part)} jobs: {part}")


async def _requeue(
    app: App, where: JobFilter, who: str, database: str | None
) -> tuple[list[int], list[int], str, set[int]]:
    """The ids requeued, the dead jobs among those picked that stayed dead (their unique key
    is held: the one reason ``requeue_dead`` leaves a picked dead job alone), what more
    matches beyond the limit, and which of the ids named are still dead."""
    listed = await app.list_jobs(JobState.DEAD, where, oldest_first=True, database=database)
    matched = {j.id for j in listed}
    ids = await app.requeue_dead(where, who=who, database=database)
    held = sorted(await _dead_now(app, tuple(sorted(matched - set(ids)))))
    more = await _more(app, where, len(held), database)
    return ids, held, more, await _dead_now(app, where.ids)


@app_command(dead, "discard")
@dead_filter_options
@who_option
def dead_discard(
    app_spec: str, url: str | None, who: str, database: str | None, **filters: Any
) -> None:
    """Discard dead jobs (by id, or by filter): they become cancelled.

    At most --limit of them, the oldest first, saying how many more match. Discarded jobs
    are kept until the retention deletes them."""
    app, where = _target(app_spec, url, filters)
    ids, more, dead_now = run_async(app, lambda: _discard(app, where, who, database))
    _said(app, "discarded", ids)
    echo(f"discarded {len(ids)} jobs: {ids}{more}")
    missing = sorted(set(where.ids or ()) - set(ids) - dead_now)
    if missing:
        raise CliError(f"not discarded: not dead, or unknown: {missing}")


async def _discard(
    app: App, where: JobFilter, who: str, database: str | None
) -> tuple[list[int], str, set[int]]:
    ids = await app.discard_dead(where, who=who, database=database)
    return ids, await _more(app, where, 0, database), await _dead_now(app, where.ids)


def _target(app_spec: str, url: str | None, filters: dict[str, Any]) -> tuple[App, JobFilter]:
    where = dead_filter(**filters)
    if where == JobFilter(limit=where.limit):
        raise click.UsageError("name job ids or a filter (--task, --queue, --error, --since)")
    return app_for(app_spec, url), where
