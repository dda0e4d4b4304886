"""Templates and the small formatting helpers they use.

Autoescaping is on for every template (``select_autoescape`` would leave a template with
another extension unescaped): every value from the database, an error message holding
``<script>`` included, reaches the page as text.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from .auth import Role, User
from .security import Csrf

STATES = ("pending", "waiting", "running", "succeeded", "cancelled", "dead")


def age(at: datetime | None, now: datetime | None = None) -> str:
    """'3 s', '4 min', '2 h', '5 d' ago (or ahead, for a future time)."""
    if at is None:
        return "—"
    seconds = ((now or datetime.now(UTC)) - at).total_seconds()
    text = duration(abs(seconds))
    return f"{text} ago" if seconds >= 0 else f"in {text}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return (
                f"{seconds / size:.0f} {unit}"
                if seconds >= 10 * size
                else (f"{seconds / size:.1f} {unit}")
            )
    if seconds >= 1:
        return f"{seconds:.1f} s"
    return f"{seconds * 1000:.0f} ms"


def stamp(at: datetime | None) -> str:
    """A UTC time as people read it: ``2026-11-30 19:04:05``."""
    return "—" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def sparkline(values: list[int], width: int = 160, height: int = 32) -> str:
    """An SVG polyline's points for ``values`` scaled into the box (no inline style: CSP)."""
    if not values:
        return ""
    if len(values) == 1:
        values = values * 2
    top = max(max(values), 1)
    step = width / (len(values) - 1)
    return " ".join(
        f"{i * step:.1f},{height - 2 - (v / top) * (height - 4):.1f}" for i, v in enumerate(values)
    )


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("skiplock.dashboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(age=age, duration=duration, stamp=stamp, pretty_json=pretty_json)
    env.globals.update(sparkline=sparkline, STATES=STATES, Role=Role)
    return env


class Renderer:
    """Renders a page with what every page needs: the user, their CSRF token, the nav."""

    def __init__(self, csrf: Csrf, refresh_s: float) -> None:
        self.env = environment()
        self.csrf = csrf
        self.refresh_s = refresh_s

    def page(
        self, request: Request, template: str, status_code: int = 200, **context: Any
    ) -> HTMLResponse:
        user: User = request.state.user
        directory = request.app.state.dashboard.app.directory
        html = self.env.get_template(template).render(
            request=request,
            url_for=request.url_for,
            root=request.scope.get("root_path", ""),
            user=user,
            # error messages, tracebacks and progress messages quote arguments: operators only
            details=user.may(Role.OPERATOR),
            signs_out=hasattr(request.app.state.dashboard.auth, "sign_out"),
            csrf=self.csrf.token(user),
            refresh_s=self.refresh_s,
            notice=self.csrf.notice(
                request.query_params.get("notice"), request.query_params.get("sig")
            ),
            now=datetime.now(UTC),
            # several databases (issue 46): a row says which it is in, a column only then
            several=directory.several,
            database_of=directory.name_of_id,
            **context,
        )
        return HTMLResponse(html, status_code=status_code)
