"""``skiplock job ...``: list, show, cancel or retry jobs.

Every action that changes a job is recorded on it (who, when, what); ``--who`` defaults to
user@host. Unknown ids, queues and tasks are clear errors, never silent no-ops.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click

from .._app_control import default_who
from .._job import JobFilter, JobRecord, JobState
from .output import echo_json, json_option, to_json
from .support import CANNOT_RUN, LIMIT, CliError, Group, app_command, app_for, run_async

JOB_ID = click.IntRange(min=1, max=2**63 - 1)
"""Ids are 64-bit on both databases: a larger number is a typo, said so before any query."""

who_option = click.option(
    "--who",
    default=default_who,
    show_default="user@host",
    help="Recorded on the job as the person who acted.",
)


def echo_job(job: JobRecord, *, full: bool) -> None:
    """One line per job; with ``full``, everything stored on it as JSON below the line."""
    finished = f" finished={job.finished_at:%Y-%m-%d %H:%M:%S}" if job.finished_at else ""
    last = f"  last error: {job.errors[-1]['message']}" if job.errors and not full else ""
    state = "claimed" if job.claimed_only else job.state.value  # leased, not reported started
    click.echo(
        f"{job.id:>8} {state:<9} {job.task} queue={job.queue} "
        f"attempt={job.attempt}/{job.max_attempts}{finished}{last}"
    )
    if full:
        details = job_details(job)
        for key in ("id", "task", "queue", "state", "attempt", "max_attempts"):
            del details[key]  # already on the line above
        click.echo(to_json(details, indent=2))


def job_details(job: JobRecord) -> dict[str, Any]:
    """Everything a person may want to know about a job, as JSON-ready values (times stay
    datetimes until dumped): ``skiplock job show --json`` prints exactly this."""
    return {
        "id": job.id,
        "task": job.task,
        "queue": job.queue,
        "state": job.state.value,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "args": job.args,
        "kwargs": job.kwargs,
        "result": job.result,
        "progress": job.progress,
        "priority": job.priority,
        "payload_version": job.payload_version,
        "run_at": job.run_at,
        "created_at": job.created_at,
        "attempted_at": job.attempted_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "worker": job.worker,
        "correlation_id": job.correlation_id,
        "unique_key": job.unique_key,
        "unique_until": job.unique_until,
        "concurrency_key": job.concurrency_key,
        "key_limit": job.key_limit,
        "key_order": job.key_order,
        "key_weight": job.key_weight,
        "errors": job.errors,
        "audit": job.audit,
        "problems": job.problems,
    }


TIME_FORMATS = ["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]
"""What ``--since`` and ``--until`` accept: a date, or a date and a time (UTC)."""


def filter_options(
    when: str, limit_help: str = "At most this many jobs, newest first."
) -> Callable[[Any], Any]:
    """``--task``, ``--queue``, ``--error``, ``--since``, ``--until`` and ``--limit``, shared by
    ``job list`` and the ``dead`` commands; ``when`` says which moment the times compare
    (the moment a dead job died, or a job's finish), ``limit_help`` which jobs the limit
    keeps (the dead commands': the oldest)."""

    def decorate(fn: Any) -> Any:
        for option in reversed(
            [
                click.option("--task", "task_name", help="Only jobs of this task."),
                click.option("--queue", "queue_name", help="Only jobs in this queue."),
                click.option(
                    "--error", help="Only jobs with an error containing this text (any case)."
                ),
                click.option(
                    "--since",
                    type=click.DateTime(TIME_FORMATS),
                    metavar="UTC-TIME",
                    help=f"Only jobs {when} at or after this UTC date or date and time, "
                    "e.g. 2026-01-31 or 2026-01-31T14:00:00.",
                ),
                click.option(
                    "--until",
                    type=click.DateTime(TIME_FORMATS),
                    metavar="UTC-TIME",
                    help=f"Only jobs {when} before this UTC date or date and time, "
                    "e.g. 2026-02-01.",
                ),
                click.option(
                    "--limit",
                    type=LIMIT,
                    default=100,
                    show_default=True,
                    help=limit_help,
                ),
            ]
        ):
            fn = option(fn)
        return fn

    return decorate


def job_filter(
    ids: tuple[int, ...],
    task_name: str | None,
    queue_name: str | None,
    error: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
) -> JobFilter:
    """The JobFilter of ``filter_options``' values (their times are UTC); a window that ends
    before it starts is refused (a person swapped them: "no jobs" would hide it)."""
    if since is not None and until is not None and until <= since:
        raise CliError(f"--until {until} is not after --since {since}", CANNOT_RUN)
    return JobFilter(
        ids=ids or None,
        task=task_name,
        queue=queue_name,
        error=error,
        since=since.replace(tzinfo=UTC) if since else None,
        until=until.replace(tzinfo=UTC) if until else None,
        limit=limit,
    )


def echo_jobs(jobs: list[JobRecord], noun: str, as_json: bool) -> None:
    """A listing: one line per job and a count, or ``{"count": n, "jobs": [...]}``."""
    if as_json:
        echo_json({"count": len(jobs), "jobs": [job_details(j) for j in jobs]})
        return
    for j in jobs:
        echo_job(j, full=False)
    click.echo(f"{len(jobs)} {noun}")


@click.group(cls=Group)
def job() -> None:
    """List, show, cancel or retry jobs."""


@app_command(job, "list")
@click.option(
    "--state", type=click.Choice([s.value for s in JobState]), help="Only jobs in this state."
)
@filter_options("finished (or, if unfinished, created)")
@json_option
def job_list(
    app_spec: str, url: str | None, state: str | None, as_json: bool, **filters: Any
) -> None:
    """Jobs matching the filters, newest first."""
    app = app_for(app_spec, url)
    where = job_filter((), **filters)
    jobs = run_async(app, lambda: app.list_jobs(JobState(state) if state else None, where))
    echo_jobs(jobs, "jobs", as_json)


@app_command(job, "show")
@click.argument("job_id", type=JOB_ID)
@json_option
def job_show(app_spec: str, url: str | None, job_id: int, as_json: bool) -> None:
    """Everything about one job.

    Its state, arguments, result, progress, which worker ran it, each attempt's error, and
    what people did to it."""
    app = app_for(app_spec, url)
    record = run_async(app, lambda: app.get_job(job_id))
    if as_json:
        echo_json(job_details(record))
    else:
        echo_job(record, full=True)


@app_command(job, "cancel")
@click.argument("job_id", type=JOB_ID)
@who_option
def job_cancel(app_spec: str, url: str | None, job_id: int, who: str) -> None:
    """Cancel a job; a running one is flagged for its worker.

    A pending job never runs; a running one is cancelled by its worker within about a
    second or, if that worker is gone, when its lease expires."""
    app = app_for(app_spec, url)

    async def cancel() -> tuple[JobState, JobRecord | None]:
        state = await app.cancel_job(job_id, who=who)
        return state, await app.get_job(job_id) if state is JobState.RUNNING else None

    state, running = run_async(app, cancel)
    if running is not None:
        click.echo(f"job {job_id} is running: {_flagged(running)}")
    elif state is JobState.CANCELLED:
        click.echo(f"job {job_id} cancelled")
    else:
        raise CliError(f"job {job_id} already finished ({state.value})")


def _flagged(job: JobRecord) -> str:
    """What a cancel of a running job really does: the worker may be gone (nothing here can
    tell), so name both ways it ends."""
    if job.lease_expires_at is None:  # finished between the cancel and this read
        return "flagged; it ends as its worker records it"
    expires = job.lease_expires_at.astimezone(UTC).isoformat(timespec="seconds")
    return (
        f"flagged; it is cancelled when its lease expires at {expires}, "
        "or by its worker within about a second if that worker is alive"
    )


@app_command(job, "retry")
@click.argument("job_id", type=JOB_ID)
@who_option
def job_retry(app_spec: str, url: str | None, job_id: int, who: str) -> None:
    """Requeue a finished job with its attempts reset."""
    app = app_for(app_spec, url)

    async def retry() -> JobState | None:
        before = await app.get_job(job_id)  # JobNotFound for an unknown id
        return None if await app.retry_job(job_id, who=who) else before.state

    refused = run_async(app, retry)
    if refused is not None:
        raise CliError(f"job {job_id} is {refused.value}, not finished: nothing to retry")
    click.echo(f"job {job_id} requeued")
