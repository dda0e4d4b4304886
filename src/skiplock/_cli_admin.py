"""``skiplock queue|task|job|dead ...``: what a person does to queues and jobs.

Every action that changes a job is recorded on it (who, when, what); ``--who`` defaults to
user@host. Unknown ids, queues and tasks are clear errors, never silent no-ops.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from ._app import App
from ._app_control import default_who
from ._cli_support import load_app, run_async
from ._job import JobFilter, JobRecord, JobState

who_option = click.option(
    "--who",
    default=default_who,
    show_default="user@host",
    help="Recorded on the job as the person who acted.",
)


def _call(app: App, coro_fn: Any) -> Any:
    try:
        return run_async(app, coro_fn)
    except LookupError as exc:  # JobNotFound, UnknownTask
        raise click.ClickException(str(exc)) from exc


def _echo_job(job: JobRecord, *, full: bool) -> None:
    finished = f" finished={job.finished_at:%Y-%m-%d %H:%M:%S}" if job.finished_at else ""
    last = f"  last error: {job.errors[-1]['message']}" if job.errors else ""
    click.echo(
        f"{job.id:>8} {job.state.value:<9} {job.task} queue={job.queue} "
        f"attempt={job.attempt}/{job.max_attempts}{finished}{last if not full else ''}"
    )
    if full:
        click.echo(
            json.dumps(
                {
                    "args": job.args,
                    "kwargs": job.kwargs,
                    "priority": job.priority,
                    "run_at": job.run_at.isoformat(),
                    "created_at": job.created_at.isoformat(),
                    "locked_by": job.locked_by,
                    "errors": job.errors,
                    "audit": job.audit,
                },
                indent=2,
                default=str,
            )
        )


# -- queues ---------------------------------------------------------------------------------


@click.group()
def queue() -> None:
    """Pause, resume, bound and limit queues (stored in the database for every worker)."""


@queue.command(name="list")
@click.argument("app_spec", metavar="APP")
def queue_list(app_spec: str) -> None:
    """Each queue with its settings and live counts."""
    app = load_app(app_spec)
    for q in _call(app, app.queues):
        click.echo(
            f"{q.name:<20} pending={q.pending:<6} running={q.running:<5} "
            f"paused={'yes' if q.paused else 'no'} max_depth={q.max_depth} "
            f"max_running={q.max_running} rate_per_s={q.rate_per_s}"
        )


@queue.command(name="pause")
@click.argument("app_spec", metavar="APP")
@click.argument("name")
def queue_pause(app_spec: str, name: str) -> None:
    """Stop every worker claiming from NAME (running jobs finish)."""
    app = load_app(app_spec)
    run_async(app, lambda: app.pause_queue(name))
    click.echo(f"queue {name} paused")


@queue.command(name="resume")
@click.argument("app_spec", metavar="APP")
@click.argument("name")
def queue_resume(app_spec: str, name: str) -> None:
    """Let workers claim from NAME again."""
    app = load_app(app_spec)
    run_async(app, lambda: app.resume_queue(name))
    click.echo(f"queue {name} resumed")


def _limit(value: str | None, kind: type[int] | type[float]) -> int | float | None:
    if value is None or value.lower() == "none":
        return None
    try:
        return kind(value)
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not a number or 'none'") from exc


@queue.command(name="limit")
@click.argument("app_spec", metavar="APP")
@click.argument("name")
@click.option("--max-depth", help="Enqueue raises QueueFull past this many live jobs ('none').")
@click.option("--max-running", help="At most this many running at once, everywhere ('none').")
@click.option("--rate", help="At most this many starts per second, everywhere ('none').")
def queue_limit(
    app_spec: str, name: str, max_depth: str | None, max_running: str | None, rate: str | None
) -> None:
    """Set NAME's bound and limits; options left out are lifted."""
    app = load_app(app_spec)
    depth, running = _limit(max_depth, int), _limit(max_running, int)
    run_async(
        app,
        lambda: app.set_queue_limits(
            name,
            max_depth=None if depth is None else int(depth),
            max_running=None if running is None else int(running),
            rate_per_s=_limit(rate, float),
        ),
    )
    click.echo(f"queue {name}: max_depth={depth} max_running={running} rate_per_s={rate}")


# -- tasks ----------------------------------------------------------------------------------


@click.group()
def task() -> None:
    """Pause and resume task names everywhere."""


@task.command(name="pause")
@click.argument("app_spec", metavar="APP")
@click.argument("name")
@click.option(
    "--for", "for_s", type=click.FloatRange(min=0.1), help="Seconds (default: until resumed)."
)
def task_pause(app_spec: str, name: str, for_s: float | None) -> None:
    """Stop every worker claiming jobs of task NAME."""
    app = load_app(app_spec)
    _call(app, lambda: app.pause_task(name, for_s=for_s))
    click.echo(f"task {name} paused" + (f" for {for_s:g}s" if for_s else ""))


@task.command(name="resume")
@click.argument("app_spec", metavar="APP")
@click.argument("name")
def task_resume(app_spec: str, name: str) -> None:
    """Lift task NAME's pause (a person's or its breaker's)."""
    app = load_app(app_spec)
    resumed = _call(app, lambda: app.resume_task(name))
    click.echo(f"task {name} resumed" if resumed else f"task {name} was not paused")


# -- single jobs ----------------------------------------------------------------------------


@click.group()
def job() -> None:
    """Show, cancel or retry one job."""


@job.command(name="show")
@click.argument("app_spec", metavar="APP")
@click.argument("job_id", type=int)
def job_show(app_spec: str, job_id: int) -> None:
    """Everything about one job: state, arguments, errors, and what people did to it."""
    app = load_app(app_spec)
    _echo_job(_call(app, lambda: app.get_job(job_id)), full=True)


@job.command(name="cancel")
@click.argument("app_spec", metavar="APP")
@click.argument("job_id", type=int)
@who_option
def job_cancel(app_spec: str, job_id: int, who: str) -> None:
    """Cancel a job: pending never runs; running is cancelled by its worker within ~1 s."""
    app = load_app(app_spec)
    state = _call(app, lambda: app.cancel_job(job_id, who=who))
    if state is JobState.RUNNING:
        click.echo(f"job {job_id} is running: its worker will cancel it within about a second")
    elif state is JobState.CANCELLED:
        click.echo(f"job {job_id} cancelled")
    else:
        raise click.ClickException(f"job {job_id} already finished ({state.value})")


@job.command(name="retry")
@click.argument("app_spec", metavar="APP")
@click.argument("job_id", type=int)
@who_option
def job_retry(app_spec: str, job_id: int, who: str) -> None:
    """Requeue a finished job with its attempts reset."""
    app = load_app(app_spec)

    async def retry() -> bool:
        await app.get_job(job_id)  # JobNotFound for an unknown id
        return await app.retry_job(job_id, who=who)

    if not _call(app, retry):
        raise click.ClickException(f"job {job_id} is not finished: nothing to retry")
    click.echo(f"job {job_id} requeued")


# -- the dead-letter queue ------------------------------------------------------------------


def filter_options(fn: Any) -> Any:
    for option in reversed(
        [
            click.argument("ids", nargs=-1, type=int),
            click.option("--task", "task_name", help="Only this task."),
            click.option("--queue", "queue_name", help="Only this queue."),
            click.option("--error", help="Only jobs whose errors contain this text."),
            click.option("--since", type=click.DateTime(), help="Died at or after (UTC)."),
            click.option("--until", type=click.DateTime(), help="Died before (UTC)."),
            click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True),
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
    limit: int,
) -> JobFilter:
    return JobFilter(
        ids=ids or None,
        task=task_name,
        queue=queue_name,
        error=error,
        since=since.replace(tzinfo=UTC) if since else None,
        until=until.replace(tzinfo=UTC) if until else None,
        limit=limit,
    )


@click.group()
def dead() -> None:
    """Review dead jobs: list, requeue (attempts reset) or discard them."""


@dead.command(name="list")
@click.argument("app_spec", metavar="APP")
@filter_options
def dead_list(app_spec: str, **filters: Any) -> None:
    """Dead jobs matching the filter, newest first."""
    app = load_app(app_spec)
    jobs = run_async(app, lambda: app.list_jobs(JobState.DEAD, _filter(**filters)))
    for j in jobs:
        _echo_job(j, full=False)
    click.echo(f"{len(jobs)} dead jobs")


@dead.command(name="requeue")
@click.argument("app_spec", metavar="APP")
@filter_options
@who_option
def dead_requeue(app_spec: str, who: str, **filters: Any) -> None:
    """Requeue dead jobs (by id, or by filter) with attempts reset."""
    _dead_action(app_spec, who, filters, "requeued", lambda app: app.requeue_dead)


@dead.command(name="discard")
@click.argument("app_spec", metavar="APP")
@filter_options
@who_option
def dead_discard(app_spec: str, who: str, **filters: Any) -> None:
    """Discard dead jobs (by id, or by filter): they become cancelled, kept until retention."""
    _dead_action(app_spec, who, filters, "discarded", lambda app: app.discard_dead)


def _dead_action(app_spec: str, who: str, filters: dict[str, Any], verb: str, action: Any) -> None:
    app = load_app(app_spec)
    where = _filter(**filters)
    if where == JobFilter(limit=where.limit):
        raise click.UsageError("name job ids or a filter (--task, --queue, --error, --since)")
    ids = run_async(app, lambda: action(app)(where, who=who))
    _report(ids, where, verb)


def _report(ids: list[int], where: JobFilter, verb: str) -> None:
    missing = sorted(set(where.ids or ()) - set(ids))
    click.echo(f"{verb} {len(ids)} jobs: {ids}")
    if missing:
        held = ", or a live job holds their unique key" if verb == "requeued" else ""
        raise click.ClickException(f"not {verb}: not dead{held}, or unknown: {missing}")


COMMANDS = [queue, task, job, dead]
