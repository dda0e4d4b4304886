"""``skiplock job ...``: list, show, cancel, retry or signal jobs; waiting jobs and batches.

Every action that changes a job is recorded on it (who, when, what); ``--who`` defaults to
user@host. Unknown ids, queues and tasks are clear errors, never silent no-ops.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click

from .._app_control import default_who
from .._job import JobFilter, JobRecord, JobState
from .._job_log import JobLog, log_lines
from .._workflow_records import JobLinks, LinkedJob
from .output import echo, echo_json, json_option, to_json
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
    echo(
        f"{job.id:>8} {state:<9} {job.task} queue={job.queue} "
        f"attempt={job.attempt}/{job.max_attempts}{finished}{last}"
    )
    if full:
        details = job_details(job)
        for key in ("id", "task", "queue", "state", "attempt", "max_attempts"):
            del details[key]  # already on the line above
        echo(to_json(details, indent=2), multiline=True)


def job_details(job: JobRecord) -> dict[str, Any]:
    """Everything a person may want to know about a job, as JSON-ready values (times stay
    datetimes until dumped): ``skiplock job show --json`` prints exactly this."""
    return {
        "id": job.id,
        "task": job.task,
        "queue": job.queue,
        "lane": job.lane,
        "database": job.database,
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
    echo(f"{len(jobs)} {noun}")


@click.group(cls=Group)
def job() -> None:
    """List, show, cancel, retry or signal jobs; waiting jobs and batches."""


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

    Its state, arguments, result, progress, which worker ran it, each attempt's error, what
    people did to it, and each attempt's own log (a task with job_log=True)."""
    app = app_for(app_spec, url)

    async def read() -> tuple[JobRecord, JobLinks, list[JobLog]]:
        record = await app.get_job(job_id)
        return record, await app.job_links(job_id), await app.job_logs(job_id)

    record, links, logs = run_async(app, read)
    if as_json:
        shown = {**job_details(record), "workflow": links_details(links)}
        echo_json({**shown, "logs": [log.as_json() for log in logs]})
        return
    echo_job(record, full=True)
    for line in links_lines(links):
        echo(line)
    for log in logs:
        for line in log_lines(log, LOG_TAIL):
            echo(line)


LOG_TAIL = 50
"""The lines of each attempt's log ``job show`` prints (its tail; ``--json`` has them all)."""


def links_details(links: JobLinks) -> dict[str, Any]:
    """A job's place in a workflow as JSON (``job show --json``'s ``workflow``)."""

    def linked(jobs: list[LinkedJob]) -> list[dict[str, Any]]:
        return [
            {"id": j.id, "state": j.state, "on_parent_failure": j.on_parent_failure} for j in jobs
        ]

    return {
        "parents": linked(links.parents),
        "children": linked(links.children),
        "batch_id": links.batch_id,
        "parents_left": links.parents_left,
        "signal": links.signal,
    }


def links_lines(links: JobLinks) -> list[str]:
    """``job show``'s workflow lines: parents, children, batch, what it waits for."""

    def named(jobs: list[LinkedJob]) -> str:
        shown = ", ".join(f"{j.id} ({j.state})" for j in jobs[:20])
        more = f", and {len(jobs) - 20} more" if len(jobs) > 20 else ""
        return shown + more

    lines = []
    if links.parents:
        policy = links.parents[0].on_parent_failure
        lines.append(f"parents: {named(links.parents)}; on_parent_failure={policy}")
    if links.children:
        lines.append(f"children: {named(links.children)}")
    if links.batch_id is not None:
        lines.append(f"batch: {links.batch_id} (skiplock job batch {links.batch_id})")
    if links.signal is not None:
        lines.append(f"waits for signal {links.signal!r} (skiplock job signal ID NAME)")
    elif links.parents_left:
        lines.append(f"waits for {links.parents_left} more parent(s) to finish")
    return lines


@app_command(job, "signal")
@click.argument("job_id", type=JOB_ID)
@click.argument("name")
@click.option("--payload", help="The signal's payload as JSON (what wait_for returns).")
@who_option
def job_signal(
    app_spec: str, url: str | None, job_id: int, name: str, payload: str | None, who: str
) -> None:
    """Send the signal NAME to a job: one parked on it (wait_for(NAME)) runs again now.

    A job's signals of a name are kept in order, each taken by one wait_for(NAME): one the
    job does not wait for yet is kept for its next wait. Exits 1 when the job has finished
    (nothing kept), or is parked on another signal (kept, but not what it waits for: most
    likely a typo), naming the signal it waits for."""
    value = None
    if payload is not None:
        try:
            value = json.loads(payload)
        except ValueError as exc:
            raise CliError(f"--payload is not JSON: {exc}", CANNOT_RUN) from None
    app = app_for(app_spec, url)
    receipt = run_async(app, lambda: app.signal(job_id, name, value, who=who))
    line = f"job {job_id}: signal {name!r} {receipt.describe()}"
    if receipt.mistaken:
        raise CliError(line)
    echo(line)


@app_command(job, "waiting")
@click.option("--limit", type=LIMIT, default=100, show_default=True, help="At most this many.")
@json_option
def job_waiting(app_spec: str, url: str | None, limit: int, as_json: bool) -> None:
    """Jobs in waiting: on parents (how many are left), or parked on a signal (until when)."""
    app = app_for(app_spec, url)
    jobs = run_async(app, lambda: app.waiting_jobs(limit))
    if as_json:
        echo_json({"count": len(jobs), "jobs": [dataclasses.asdict(j) for j in jobs]})
        return
    for w in jobs:
        if w.signal is not None:
            until = f" until {w.until:%Y-%m-%d %H:%M:%S}" if w.until else ""
            what = f"signal {w.signal!r}{until}"
        else:
            what = f"{w.parents_left} parent(s) left"
        echo(f"{w.id:>8} {w.task} queue={w.queue} waits for {what}")
    echo(f"{len(jobs)} waiting")


@app_command(job, "batch")
@click.argument("batch_id", type=JOB_ID)
@click.option(
    "--database",
    "database",
    metavar="NAME",
    default="default",
    show_default=True,
    help="The database the batch is in (a batch id is its database's own number, not a job "
    "id; app.batch() opens one in the App's own).",
)
@json_option
def job_batch(app_spec: str, url: str | None, batch_id: int, database: str, as_json: bool) -> None:
    """A batch's members per state, whether it is closed, and its callbacks."""
    app = app_for(app_spec, url)
    info = run_async(app, lambda: app.batch_info(batch_id, database=database))
    if as_json:
        shown = {**dataclasses.asdict(info), "total": info.total, "finished": info.finished}
        echo_json({**shown, "database": database})
        return
    counts = " ".join(f"{state}={n}" for state, n in sorted(info.counts.items()))
    closed = "aborted" if info.aborted else "closed" if info.closed else "open"
    echo(f"batch {info.id} {closed}: {info.finished}/{info.total} finished {counts}")
    for label, callback in (("on_success", info.on_success), ("on_complete", info.on_complete)):
        if callback is not None:
            echo(f"  {label}: job {callback}")


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
        echo(f"job {job_id} is running: {_flagged(running)}")
    elif state is JobState.CANCELLED:
        echo(f"job {job_id} cancelled")
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
    """Requeue a finished job with its attempts reset (one that ended while it waited for
    its parents waits for them again)."""
    app = app_for(app_spec, url)

    async def retry() -> tuple[bool, JobState, int | None]:
        before = await app.get_job(job_id)  # JobNotFound for an unknown id
        if not await app.retry_job(job_id, who=who):
            return False, before.state, None
        after = await app.get_job(job_id)
        left = None
        if after.state is JobState.WAITING:
            left = (await app.job_links(job_id)).parents_left
        return True, after.state, left

    done, state, left = run_async(app, retry)
    if not done:
        raise CliError(f"job {job_id} is {state.value}, not finished: nothing to retry")
    if state is JobState.WAITING:
        echo(f"job {job_id} waits for its parents again ({left} left)")
    else:
        echo(f"job {job_id} requeued")
