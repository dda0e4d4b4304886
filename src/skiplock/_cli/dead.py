"""``skiplock dead ...``: review dead jobs, requeue (attempts reset) or discard them."""

from __future__ import annotations

from typing import Any

import click

from .._app import App
from .._job import JobFilter, JobState
from .job import echo_jobs, filter_options, job_filter, who_option
from .output import json_option
from .support import CliError, Group, app_command, app_for, run_async


def dead_filter_options(fn: Any) -> Any:
    """Job ids, or ``job list``'s filters (times compared with when a job died)."""
    fn = filter_options("that died")(fn)
    return click.argument("ids", nargs=-1, type=click.IntRange(min=1, max=2**63 - 1))(fn)


@click.group(cls=Group)
def dead() -> None:
    """Review dead jobs: list, requeue or discard them.

    A requeued job starts again with its attempts reset; a discarded one is cancelled."""


@app_command(dead, "list")
@dead_filter_options
@json_option
def dead_list(app_spec: str, url: str | None, as_json: bool, **filters: Any) -> None:
    """Dead jobs matching the filter, newest first."""
    app = app_for(app_spec, url)
    jobs = run_async(app, lambda: app.list_jobs(JobState.DEAD, job_filter(**filters)))
    echo_jobs(jobs, "dead jobs", as_json)


@app_command(dead, "requeue")
@dead_filter_options
@who_option
def dead_requeue(app_spec: str, url: str | None, who: str, **filters: Any) -> None:
    """Requeue dead jobs (by id, or by filter) with attempts reset.

    A dead job whose unique key a live job holds stays dead, and is reported as skipped."""
    app, where = _target(app_spec, url, filters)
    ids, held = run_async(app, lambda: _requeue(app, where, who))
    click.echo(f"requeued {len(ids)} jobs: {ids}")
    problems = []
    if held:
        problems.append(f"skipped {len(held)} jobs, a live job holds their unique key: {held}")
    missing = sorted(set(where.ids or ()) - set(ids) - set(held))
    if missing:
        problems.append(f"not requeued: not dead, or unknown: {missing}")
    if problems:
        raise CliError("; ".join(problems))


async def _requeue(app: App, where: JobFilter, who: str) -> tuple[list[int], list[int]]:
    """The ids requeued, and the dead jobs the filter matched that stayed dead (their unique
    key is held: the one reason ``requeue_dead`` leaves a matching dead job alone)."""
    matched = {j.id for j in await app.list_jobs(JobState.DEAD, where)}
    ids = await app.requeue_dead(where, who=who)
    rest = tuple(sorted(matched - set(ids)))
    if not rest:
        return ids, []
    still = await app.list_jobs(JobState.DEAD, JobFilter(ids=rest, limit=len(rest)))
    return ids, sorted(j.id for j in still)


@app_command(dead, "discard")
@dead_filter_options
@who_option
def dead_discard(app_spec: str, url: str | None, who: str, **filters: Any) -> None:
    """Discard dead jobs (by id, or by filter): they become cancelled.

    Discarded jobs are kept until the retention deletes them."""
    app, where = _target(app_spec, url, filters)
    ids = run_async(app, lambda: app.discard_dead(where, who=who))
    click.echo(f"discarded {len(ids)} jobs: {ids}")
    missing = sorted(set(where.ids or ()) - set(ids))
    if missing:
        raise CliError(f"not discarded: not dead, or unknown: {missing}")


def _target(app_spec: str, url: str | None, filters: dict[str, Any]) -> tuple[App, JobFilter]:
    where = job_filter(**filters)
    if where == JobFilter(limit=where.limit):
        raise click.UsageError("name job ids or a filter (--task, --queue, --error, --since)")
    return app_for(app_spec, url), where
