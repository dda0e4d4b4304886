"""The pages (GET): each reads through the App's operations and renders one template."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from .._job import BlockedKey, JobFilter, JobRecord, JobState, KeyLoad
from ..errors import BackendUnavailable, ConfigurationError, JobNotFound
from .auth import Role
from .filters import (
    PAGE_SIZE,
    BadFilter,
    after_id,
    exact_text_field,
    job_id,
    job_query,
    selected_ids,
    text_field,
)
from .graph import draw
from .overview import ALERT_BACKLOG_AGE_S, read_overview

if TYPE_CHECKING:
    from .._app import App
    from .state import Dashboard


STATS_WINDOW_S = 300.0
"""The Overview's rates (throughput, claim latency, retries) are over the last 5 minutes."""


FINISHED = frozenset({JobState.SUCCEEDED, JobState.CANCELLED, JobState.DEAD})
LIVE = frozenset({JobState.PENDING, JobState.RUNNING})
CANCELLABLE = LIVE | {JobState.WAITING}
"""A person may cancel a live job, and a waiting one (neither live nor finished: it holds no
unique key and no worker; its waiting children follow their ``on_parent_failure``)."""

GRAPH_MOST = 100
"""The most jobs a workflow graph draws on a job's page (``app.workflow_graph(most=...)``);
past it the page says the graph stops there."""

LINKS_SHOWN = 100
"""A job's page lists this many of its parents (in order, all of them counted by state) and
of its children, and links to the rest (a chord's body may have 10,000 parents: listed in
full, its page was 2.5 MB)."""

LINKED_PAGE = 200
"""The parents (or children) page lists this many, by id, with a link to the next."""

WAITING_SHOWN = 200
"""The Waiting page lists this many waiting jobs, the oldest first, and counts them all."""

SILENT_AFTER_S = 30.0
"""A worker beats every 5 s by default: one silent for 30 s is flagged (stalled or gone)."""


def dashboard(request: Request) -> Dashboard:
    dash: Dashboard = request.app.state.dashboard
    return dash


async def overview(request: Request) -> Response:
    dash = dashboard(request)
    dash.sampler.ensure_started()
    app = dash.app
    reading = await read_overview(app, dash.sampler, STATS_WINDOW_S)
    rows = reading.rows
    shown = ("pending", "claimed", "running", "waiting", "dead")
    totals = {s: sum(r.counts.get(s, 0) for r in rows) for s in shown}
    down = bool(reading.down)
    workers = await _each_up(app, down, lambda database: app.workers(database=database))
    live_workers = sum(w.silent_s <= SILENT_AFTER_S for w in workers)
    return dash.render.page(
        request,
        "overview.html",
        down=reading.down,
        rows=rows,
        totals=totals,
        live_workers=live_workers,
        ready=reading.ready,
        # ready work and nobody to run it: the one state an operator must see at a glance
        workers_alert=live_workers == 0 and reading.ready > 0,
        pauses=await _each_up(app, down, lambda database: app.task_pauses(database=database)),
        keys=_keys_shown(request, reading.keys),
        blocked_keys=_keys_shown(request, reading.blocked_keys),
        sample_every_s=dash.sampler.every_s,
        window_s=STATS_WINDOW_S,
        alert_backlog_s=ALERT_BACKLOG_AGE_S,
    )


Row = TypeVar("Row")


async def _each_up(
    app: App, down: bool, read: Callable[[str | None], Awaitable[list[Row]]]
) -> list[Row]:
    """``read`` of every database; with one down (the Overview said so), of the others."""
    if not down:
        return await read(None)
    rows: list[Row] = []
    for database in app.directory.names():
        with contextlib.suppress(BackendUnavailable):
            rows += await read(database)
    return rows


Keyed = TypeVar("Keyed", KeyLoad, BlockedKey)


def _keys_shown(request: Request, rows: Sequence[Keyed]) -> Sequence[Keyed]:
    """Keys as the person may see them: an operator (who reads arguments anyway) the key, a
    viewer its pseudonym (keys are made from arguments: tenants' e-mails)."""
    if request.state.user.may(Role.OPERATOR):
        return rows
    csrf = dashboard(request).csrf
    return [dataclasses.replace(row, key=csrf.pseudonym(row.key)) for row in rows]


def finds_hidden(request: Request, find: str) -> Response | None:
    """A viewer may look a job up by its id, not by a unique key or a correlation id: those
    are made from arguments, and a hit would confirm a guess at one."""
    if find and not find.strip().isdigit() and not request.state.user.may(Role.OPERATOR):
        problem = (
            "find: looking jobs up by unique key or correlation id needs the operator role "
            "(a viewer may give a job id)"
        )
        return dashboard(request).render.page(request, "problem.html", 403, problem=problem)
    return None


def errors_hidden(request: Request, params: Any) -> Response | None:
    """A viewer may not read error messages, so may not search them either (a filter on the
    error text would answer "is the card number in it?" one guess at a time)."""
    searched = params.get("error") or "last_error" in params
    if searched and not request.state.user.may(Role.OPERATOR):
        problem = "error: searching error messages needs the operator role"
        return dashboard(request).render.page(request, "problem.html", 403, problem=problem)
    return None


async def jobs(request: Request) -> Response:
    dash = dashboard(request)
    if (refused := errors_hidden(request, request.query_params)) is not None:
        return refused
    try:
        query = job_query(request.query_params)
    except BadFilter as exc:
        return dash.render.page(
            request, "jobs.html", 400, query=None, error=str(exc), rows=[], counts={}
        )
    if (refused := finds_hidden(request, query.find)) is not None:
        return refused
    started = time.perf_counter()
    if query.find:  # a search names jobs exactly: the other filters do not apply
        rows = await dash.app.find_jobs(query.find, limit=PAGE_SIZE)
        more, counts = False, {}
    else:
        rows = await dash.app.list_jobs(
            query.state, query.job_filter(PAGE_SIZE + 1), before_id=query.before
        )
        more = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
        counts = await dash.app.count_jobs_by_state(query.job_filter())
    elapsed_ms = (time.perf_counter() - started) * 1000
    next_link = query.link(before=rows[-1].id) if more else None
    return dash.render.page(
        request,
        "jobs.html",
        query=query,
        error=None,
        rows=rows,
        counts=counts,
        next_link=next_link,
        first_link=query.link(before=None) if query.before else None,
        elapsed_ms=elapsed_ms,
        tasks=sorted(dash.app.tasks),
        queues=sorted({t.queue for t in dash.app.tasks.values()}),
    )


SELECTION_VERBS = {"retry": FINISHED, "cancel": CANCELLABLE}
"""What each bulk verb on selected jobs acts on: retry a finished job, cancel a live or
waiting one."""


async def selected_confirm(request: Request) -> Response:
    """The preview of a bulk action on jobs ticked on the Jobs page: exactly those ids, which
    of them the action would change (and which it would leave, and why), and a form that
    carries exactly the changeable ones."""
    dash = dashboard(request)
    action = request.query_params.get("action", "")
    try:
        if action not in SELECTION_VERBS:
            raise BadFilter(f"action {action!r}: must be retry or cancel")
        ids = selected_ids(request.query_params.getlist("ids"))
    except BadFilter as exc:
        return dash.render.page(request, "problem.html", 400, problem=str(exc))
    found = {j.id: j for j in await dash.app.list_jobs(None, JobFilter(ids=ids, limit=len(ids)))}
    acted = [found[i] for i in ids if i in found and found[i].state in SELECTION_VERBS[action]]
    left = [found[i] for i in ids if i in found and found[i].state not in SELECTION_VERBS[action]]
    missing = [i for i in ids if i not in found]
    return dash.render.page(
        request,
        "selected.html",
        action=action,
        acted=acted,
        left=left,
        missing=missing,
        count=len(acted),
    )


def timeline(job: JobRecord) -> list[tuple[str, str, str]]:
    """(time, what, detail) of everything the row remembers, in time order."""
    events: list[tuple[str, str, str]] = [(job.created_at.isoformat(), "enqueued", "")]
    for error in job.errors:
        if isinstance(error, dict):
            what = f"attempt {error.get('attempt', '?')} failed"
            events.append((str(error.get("at", "")), what, str(error.get("message", ""))))
    if job.attempted_at is not None:
        events.append((job.attempted_at.isoformat(), f"attempt {job.attempt} claimed", ""))
    if job.started_at is not None:
        events.append((job.started_at.isoformat(), f"attempt {job.attempt} started", ""))
    for entry in job.audit:
        if isinstance(entry, dict):
            what = f"{entry.get('what', '?')} by {entry.get('who', '?')}"
            if "omitted" in entry:  # the count of the row's older actions (the audit trail)
                what = str(entry.get("what", "?"))
            events.append((str(entry.get("at", "")), what, ""))
    if job.finished_at is not None:
        events.append((job.finished_at.isoformat(), job.state.value, ""))
    return sorted(events, key=lambda e: e[0])


async def job(request: Request) -> Response:
    dash = dashboard(request)
    try:
        record = await dash.app.get_job(job_id(request.path_params["job_id"]))
    except (JobNotFound, BadFilter):
        job_text = request.path_params["job_id"]
        return dash.render.page(request, "missing.html", 404, what=f"job {job_text}")
    shown = LINKS_SHOWN + 1  # one more says there are more
    links = await dash.app.job_links(record.id, parents_limit=shown, children_limit=shown)
    drawing = None
    if links.parents or links.children:
        drawing = draw(await dash.app.workflow_graph(record.id, most=GRAPH_MOST), record.id)
    batch = None
    if links.batch_id is not None:
        with contextlib.suppress(JobNotFound):  # pruned with its jobs since the links' read
            # the batch is in the job's database (its members are where it is)
            database = dash.app.directory.name_of_id(record.id)
            batch = await dash.app.batch_info(links.batch_id, database=database)
    return dash.render.page(
        request,
        "job.html",
        job=record,
        events=timeline(record),
        payload=request.state.user.may(Role.OPERATOR),
        errors=list(reversed(record.errors)),
        # a job's own log (job_log=True) may quote its arguments: shown where they are
        logs=await dash.app.job_logs(record.id),
        problems=shown_problems(record, request.state.user.may(Role.OPERATOR)),
        links=None if links.empty else links,
        batch=batch,
        drawing=drawing,
        graph_most=GRAPH_MOST,
        links_shown=LINKS_SHOWN,
        # refreshed while the job, or any job of its workflow drawn, may still change
        live=record.state not in FINISHED or (drawing is not None and drawing.live),
    )


async def linked(request: Request) -> Response:
    """A job's parents (or children), a page at a time by id, each with its state: what
    the job's own page leaves out past its first ``LINKS_SHOWN``."""
    dash = dashboard(request)
    side = request.path_params["side"]
    try:
        record = await dash.app.get_job(job_id(request.path_params["job_id"]))
        after = after_id(request.query_params)
    except (JobNotFound, BadFilter):
        job_text = request.path_params["job_id"]
        return dash.render.page(request, "missing.html", 404, what=f"job {job_text}")
    rows = await dash.app.linked_jobs(record.id, side, after=after, limit=LINKED_PAGE + 1)
    more = len(rows) > LINKED_PAGE
    rows = rows[:LINKED_PAGE]
    counts: dict[str, int] = {}
    if side == "parents":
        one = await dash.app.job_links(record.id, parents_limit=1, children_limit=1)
        counts = one.parent_counts
    return dash.render.page(
        request,
        "linked.html",
        job=record,
        side=side,
        rows=rows,
        counts=counts,
        after=after,
        next_after=rows[-1].id if more else None,
    )


def shown_problems(record: JobRecord, details: bool) -> list[str]:
    """What the row holds that skiplock did not write. A problem quotes the value it could not
    read (arguments, a result, an error): to a viewer only the column is named."""
    if details:
        return record.problems
    return list(dict.fromkeys(p.split(":", 1)[0] for p in record.problems))


async def dead(request: Request) -> Response:
    dash = dashboard(request)
    groups = await dash.app.dead_groups()
    total = sum(g.count for g in groups)
    return dash.render.page(request, "dead.html", groups=groups, total=total)


async def dead_confirm(request: Request) -> Response:
    """The preview of a bulk action: how many dead jobs it would touch, and a form to do it."""
    dash = dashboard(request)
    params = request.query_params
    if not request.state.user.may(Role.OPERATOR):
        problem = "the bulk actions' preview needs the operator role"
        return dash.render.page(request, "problem.html", 403, problem=problem)
    action = params.get("action", "")
    if action not in ("requeue", "discard"):
        problem = f"action {action!r}: must be requeue or discard"
        return dash.render.page(request, "problem.html", 400, problem=problem)
    try:
        task, error = text_field(params, "task"), exact_text_field(params, "error")
    except BadFilter as exc:
        return dash.render.page(request, "problem.html", 400, problem=str(exc))
    # a group is its task and its exact last error: "boom 1" must not reach "boom 10" (no
    # error at all in the link: any error; an empty one: the group of jobs without one)
    where = JobFilter(task=task or None, last_error=error if "error" in params else None)
    # several databases: a group is one database's (its link names it); none: every one
    database = text_field(params, "database") or None
    try:
        count = await dash.app.count_jobs(JobState.DEAD, where, database=database)
    except ConfigurationError as exc:  # a database this App does not name
        return dash.render.page(request, "problem.html", 400, problem=str(exc))
    return dash.render.page(
        request, "confirm.html", action=action, where=where, count=count, database=database
    )


async def waiting(request: Request) -> Response:
    """The jobs in ``waiting``: on their parents, or parked on a signal (and until when)."""
    dash = dashboard(request)
    rows = await dash.app.waiting_jobs(WAITING_SHOWN)
    total = await dash.app.count_jobs(JobState.WAITING)
    return dash.render.page(request, "waiting.html", rows=rows, total=max(total, len(rows)))


async def schedules(request: Request) -> Response:
    dash = dashboard(request)
    runs = {r.schedule: r for r in await dash.app.cron_last_runs()}
    now = datetime.now(UTC)
    rows = [
        (s, s.next_fires(now, 3), runs.get(s.id))
        for s in sorted(dash.app.schedules.values(), key=lambda s: s.id)
    ]
    return dash.render.page(request, "schedules.html", rows=rows)


async def workers(request: Request) -> Response:
    """The live-worker registry, each worker with the jobs it holds now."""
    dash = dashboard(request)
    registry = await dash.app.workers()
    held = await dash.app.list_jobs(JobState.RUNNING, JobFilter(limit=5000))
    by_worker: dict[str, list[JobRecord]] = {}
    for record in held:
        by_worker.setdefault(record.locked_by or "", []).append(record)
    rows: list[dict[str, Any]] = [
        {"info": w, "jobs": by_worker.get(w.name, []), "silent": w.silent_s > SILENT_AFTER_S}
        for w in registry
    ]
    return dash.render.page(request, "workers.html", rows=rows, silent_after_s=SILENT_AFTER_S)
