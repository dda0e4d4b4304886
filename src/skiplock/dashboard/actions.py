"""The actions (POST): each checks the role and the CSRF token, acts through the App's own
operation (the one the CLI uses), records who did it, and redirects back (303).

Job actions land in the job's audit trail as ``"<user> via dashboard"``; queue actions (no
job to hold them) are logged on the ``skiplock.dashboard`` logger with the same name.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote, urlencode

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from .._job import JobFilter, JobState
from ..errors import JobNotFound, SkiplockError
from .audit import audit, audit_refusal
from .auth import Role, User
from .filters import (
    MAX_SELECTED,
    BadFilter,
    exact_text_field,
    job_id,
    selected_ids,
    text_field,
)
from .pages import CANCELLABLE, dashboard
from .security import same_origin

log = logging.getLogger("skiplock.dashboard")

Handler = Callable[[Request, User, FormData], Awaitable[Response]]


MAX_FORM_BYTES = 4 * 1024 * 1024
"""The largest form body read: a signal's payload is the biggest field a page sends
(MAX_SIGNAL_PAYLOAD_CHARS, percent-encoded)."""

MAX_FORM_FIELDS = MAX_SELECTED + 20
"""The most fields a form may have: a bulk action's ticked ids, and a few more."""

MAX_FIELD_BYTES = 3 * 1024 * 1024
"""The largest one field may be."""


def action(role: Role) -> Callable[[Handler], Callable[[Request], Awaitable[Response]]]:
    """Wrap a handler: refuse a cross-site POST (403), a role too low (403), a body too large
    (413), a token-less or forged form (403).

    The Origin and the role are checked before the body is read, so a stranger's POST (the
    anonymous viewer may act on nothing) costs no parsing; the form is then read with explicit
    limits on its size, its fields and each field, whatever the Starlette release does."""

    def wrap(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            dash = dashboard(request)
            user: User = request.state.user
            what = f"refused {handler.__name__.replace('_', ' ')}"
            target = request.scope["path"]

            async def refuse(detail: str, status: int, answer: str) -> Response:
                await audit_refusal(dash, user, what, who(user), target, detail)
                return PlainTextResponse(answer, status_code=status)

            origin = request.headers.get("origin")
            if not same_origin(origin, request.headers.get("host")):
                return await refuse(
                    f"Origin {origin!r} is another site",
                    403,
                    f"Refused: this request came from another site (its Origin header is "
                    f"{origin!r}, not this dashboard's address). Open the dashboard itself "
                    "and act from its pages.",
                )
            if not user.may(role):
                return await refuse(
                    f"needs the {role.label} role",
                    403,
                    f"Refused: this needs the {role.label} role; {user.name} is {user.role.label}.",
                )
            form = await _bounded_form(request)
            if isinstance(form, str):
                return await refuse(form, 413, f"Refused: {form}.")
            if not dash.csrf.valid(user, form.get("csrf")):
                return await refuse(
                    "CSRF token missing or wrong",
                    403,
                    "Refused: this form did not come from this dashboard (CSRF token missing "
                    "or wrong). Reload the page and try again.",
                )
            try:
                return await handler(request, user, form)
            except (BadFilter, SkiplockError) as exc:
                await audit(dash, what, who(user), target, str(exc))
                return PlainTextResponse(f"Refused: {exc}", status_code=400)

        endpoint.__name__ = handler.__name__
        return endpoint

    return wrap


async def _bounded_form(request: Request) -> FormData | str:
    """The POSTed form, read within MAX_FORM_BYTES, MAX_FORM_FIELDS and MAX_FIELD_BYTES (no
    files); what is wrong with it otherwise. A body must say its length (browsers do)."""
    length = request.headers.get("content-length", "")
    if not length.isdigit():
        return "the form must be sent with a Content-Length"
    if int(length) > MAX_FORM_BYTES:
        return f"the form is {int(length)} bytes; at most {MAX_FORM_BYTES} are read"
    try:
        return await request.form(
            max_files=0, max_fields=MAX_FORM_FIELDS, max_part_size=MAX_FIELD_BYTES
        )
    except HTTPException as exc:  # the parser's own limits (too many fields, a field too big)
        return f"the form was not read: {exc.detail}"


def who(user: User) -> str:
    return f"{user.name} via dashboard"


def back(request: Request, route: str, notice: str, **params: Any) -> RedirectResponse:
    url = str(request.url_for(route, **params))
    query = urlencode({"notice": notice, "sig": dashboard(request).csrf.sign(notice)})
    return RedirectResponse(f"{url}?{query}", status_code=303)


@action(Role.OPERATOR)
async def retry_job(request: Request, user: User, form: FormData) -> Response:
    job = job_id(request.path_params["job_id"])
    app = dashboard(request).app
    done = await app.retry_job(job, who=who(user))
    notice = "Requeued." if done else "Not retried: only a finished job can be."
    if done and (await app.get_job(job)).state is JobState.WAITING:
        notice = "Retried: it waits for its parents again, and runs with their results."
    return back(request, "job", notice, job_id=job)


@action(Role.OPERATOR)
async def cancel_job(request: Request, user: User, form: FormData) -> Response:
    job = job_id(request.path_params["job_id"])
    state = await dashboard(request).app.cancel_job(job, who=who(user))
    return back(request, "job", f"Cancel asked; the job is now {state.value}.", job_id=job)


SIGNAL_BACK = {"waiting": "waiting", "job": "job"}
"""The pages a signal form may come back to (a fixed set: never a URL from the form)."""

MAX_SIGNAL_PAYLOAD_CHARS = 1_000_000
"""A payload typed longer than this is refused before parsing (the App's max_payload_bytes
decides what is stored: 256 KiB by default)."""


@action(Role.OPERATOR)
async def send_signal(request: Request, user: User, form: FormData) -> Response:
    """Send the signal named in the form, with its JSON payload, to exactly the job in the
    path, through ``app.signal`` (audited; a send the job does not wait for now is kept for
    its next wait, and the notice names what it does wait for)."""
    job = job_id(request.path_params["job_id"])
    name = text_field(form, "name")
    if not name:
        raise BadFilter("name: the signal's name, as the job waits for it (e.g. approved)")
    payload = _signal_payload(form)
    app = dashboard(request).app
    receipt = await app.signal(job, name, payload, who=who(user))
    notice = f"Signal {name} to job {job}: {receipt.describe()}"
    if receipt.awaited:
        try:
            notice += f"; the job is now {(await app.get_job(job)).state.value}."
        except JobNotFound:  # pruned in between: the signal was delivered all the same
            notice += "."
    else:
        notice += "."
    log.info("%s sent signal %r to job %d: %s", who(user), name, job, receipt.outcome.value)
    page = SIGNAL_BACK.get(str(form.get("back") or ""), "job")
    if page == "job":
        return back(request, "job", notice, job_id=job)
    return back(request, page, notice)


def _signal_payload(form: FormData) -> Any:
    """The payload typed as JSON (empty: none), or a BadFilter saying what is wrong with it."""
    text = str(form.get("payload") or "").strip()
    if not text:
        return None
    if len(text) > MAX_SIGNAL_PAYLOAD_CHARS:
        raise BadFilter(f"payload: at most {MAX_SIGNAL_PAYLOAD_CHARS:,} characters of JSON")
    try:
        return json.loads(text, parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        raise BadFilter(
            f"payload: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            'type JSON such as {"approved_by": "ann"} or "yes", or leave it empty'
        ) from None
    except RecursionError:
        raise BadFilter("payload: not strict JSON (nested too deep)") from None
    except ValueError as exc:  # NaN, Infinity
        raise BadFilter(f"payload: not strict JSON ({exc})") from None


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


def _text(form: FormData, name: str) -> str | None:
    return text_field(form, name) or None


@action(Role.OPERATOR)
async def dead_bulk(request: Request, user: User, form: FormData) -> Response:
    """Requeue or discard the dead jobs a confirmation page previewed: the group (task and
    exact last error), at most as many as the preview counted (the oldest first), so jobs
    that joined the group since are left for their own preview."""
    verb = request.path_params["action"]
    if verb not in ("requeue", "discard"):  # the route admits only these; never a default
        raise BadFilter(f"action {verb!r}: must be requeue or discard")
    if form.get("confirm") != "yes":
        raise BadFilter("bulk changes need the confirmation page's Confirm button")
    where = JobFilter(
        task=_text(form, "task"),
        # percent-encoded in the form: a browser rewrites a field's line breaks as CRLF
        last_error=(
            exact_text_field({"error": unquote(str(form["error"]))}, "error")
            if "error" in form
            else None
        ),
        limit=_count(form),
    )
    app = dashboard(request).app
    act = {"requeue": app.requeue_dead, "discard": app.discard_dead}[verb]
    # a dead-letter group of one database (several): its preview counted that one alone
    ids = await act(where, who=who(user), database=_text(form, "database"))
    done = {"requeue": "requeued", "discard": "discarded"}[verb]
    log.info("%s %s %d dead jobs (%s)", who(user), done, len(ids), where)
    return back(request, "dead", f"{done.capitalize()} {len(ids)} dead jobs.")


def _count(form: FormData) -> int:
    """The preview's count, the most a confirmed bulk action may touch."""
    text = str(form.get("count") or "").strip()
    if not text.isdigit() or not 1 <= int(text) <= 2**63 - 1:
        raise BadFilter(f"count {text!r}: the preview's job count (a whole number, 1 or more)")
    return int(text)


@action(Role.OPERATOR)
async def selected_bulk(request: Request, user: User, form: FormData) -> Response:
    """Retry or cancel exactly the jobs a selection's confirmation page listed, one by one
    through the App's own operation (each audited); a job that changed state since the
    preview is left as it is, and counted so."""
    verb = request.path_params["action"]
    if verb not in ("retry", "cancel"):
        raise BadFilter(f"action {verb!r}: must be retry or cancel")
    if form.get("confirm") != "yes":
        raise BadFilter("bulk changes need the confirmation page's Confirm button")
    ids = selected_ids([str(v) for v in form.getlist("ids")])
    app = dashboard(request).app
    done = 0
    for job in ids:
        try:
            if verb == "retry":
                done += await app.retry_job(job, who=who(user))
            elif (await app.get_job(job)).state in CANCELLABLE:
                await app.cancel_job(job, who=who(user))
                done += 1
        except SkiplockError:  # pruned since the preview, or a live job holds its unique key
            continue
    log.info("%s %s %d of %d selected jobs %s", who(user), verb, done, len(ids), list(ids))
    past = "Retried" if verb == "retry" else "Cancel asked for"
    notice = f"{past} {done} of {len(ids)} selected jobs."
    return back(request, "jobs", notice)


def _database(form: FormData) -> tuple[str | None, str]:
    """The database an Overview row's form names (several databases: a row is one queue of
    one database, and its settings are that database's), and how a notice says it; none:
    every database (an unknown name is refused by the operation, naming the known ones)."""
    database = _text(form, "database")
    return database, f" in database {database}" if database else ""


@action(Role.OPERATOR)
async def pause_queue(request: Request, user: User, form: FormData) -> Response:
    queue = request.path_params["queue"]
    database, where = _database(form)
    await dashboard(request).app.pause_queue(queue, who=who(user), database=database)
    log.info("%s paused queue %r%s", who(user), queue, where)
    return back(request, "overview", f"Paused queue {queue}{where}.")


@action(Role.OPERATOR)
async def resume_queue(request: Request, user: User, form: FormData) -> Response:
    queue = request.path_params["queue"]
    database, where = _database(form)
    await dashboard(request).app.resume_queue(queue, who=who(user), database=database)
    log.info("%s resumed queue %r%s", who(user), queue, where)
    return back(request, "overview", f"Resumed queue {queue}{where}.")


def _number(form: FormData, name: str, whole: bool) -> Any:
    text = str(form.get(name) or "").strip()
    if not text:
        return None
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise BadFilter(f"{name} {text!r}: must be {kind}, or empty to lift it") from None
    if not math.isfinite(value):
        raise BadFilter(f"{name} {text!r}: must be finite")
    return value


@action(Role.ADMIN)
async def queue_limits(request: Request, user: User, form: FormData) -> Response:
    queue = request.path_params["queue"]
    limits = {
        "max_depth": _number(form, "max_depth", True),
        "max_running": _number(form, "max_running", True),
        "rate_per_s": _number(form, "rate_per_s", False),
        "aging_s": _number(form, "aging_s", False),
    }
    database, where = _database(form)
    app = dashboard(request).app
    await app.set_queue_limits(queue, **limits, who=who(user), database=database)
    log.info("%s set queue %r limits %s%s", who(user), queue, limits, where)
    return back(request, "overview", f"Limits of {queue} set{where}.")


@action(Role.ADMIN)
async def prune(request: Request, user: User, form: FormData) -> Response:
    """Apply a retention now: delete finished and dead jobs older than the given days."""
    days = {name: _number(form, name, False) for name in ("finished_days", "dead_days")}
    if None in days.values():
        raise BadFilter("finished_days and dead_days: both are needed (days, e.g. 7 and 30)")
    deleted = await dashboard(request).app.prune(
        finished_age_s=days["finished_days"] * 86400.0,
        dead_age_s=days["dead_days"] * 86400.0,
        who=who(user),
    )
    log.info("%s pruned %d jobs past retention %s", who(user), deleted, days)
    return back(request, "overview", f"Deleted {deleted} jobs past retention.")
