"""``create_app``: the dashboard as an ASGI app (Starlette), to serve alone or mount.

Every request is authenticated first (the auth callable decides who is asking; None is a
401), then routed; every response carries the security headers (a strict CSP among them).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .._app import App
from ..errors import ConfigurationError
from . import actions, pages
from .auth import Auth, no_auth, resolve
from .render import Renderer
from .sampler import Sampler
from .security import SECURITY_HEADERS, Csrf

log = logging.getLogger("skiplock.dashboard")

STATIC = Path(__file__).parent / "static"


class Dashboard:
    """What every page and action reaches through ``request.app.state.dashboard``."""

    def __init__(
        self, app: App, auth: Auth, csrf: Csrf, render: Renderer, sampler: Sampler
    ) -> None:
        self.app, self.auth, self.csrf, self.render, self.sampler = (
            app,
            auth,
            csrf,
            render,
            sampler,
        )


class _Guard(BaseHTTPMiddleware):
    """Decides who is asking before any route runs, and sets the security headers."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        dash: Dashboard = request.app.state.dashboard
        if request.url.path.startswith(f"{request.scope.get('root_path', '')}/static/"):
            response = await call_next(request)
            response.headers.update(SECURITY_HEADERS)
            response.headers["Cache-Control"] = "public, max-age=3600"  # no data in them
            return response
        response = await self._authenticated(dash, request, call_next)
        response.headers.update(SECURITY_HEADERS)
        return response

    async def _authenticated(
        self, dash: Dashboard, request: Request, call_next: RequestResponseEndpoint
    ) -> Response:
        try:
            user = await resolve(dash.auth, request)
        except ConfigurationError as exc:  # e.g. a proxy header naming no role
            return PlainTextResponse(f"Refused: {exc}", status_code=403)
        if user is None:
            challenge = getattr(dash.auth, "challenge", None)
            headers = {"WWW-Authenticate": challenge} if challenge else {}
            return PlainTextResponse(
                "Sign in to see the skiplock dashboard.", status_code=401, headers=headers
            )
        request.state.user = user
        return await call_next(request)


def routes() -> list[Route | Mount]:
    get: list[tuple[str, Callable[[Request], Awaitable[Response]], str]] = [
        ("/", pages.overview, "overview"),
        ("/jobs", pages.jobs, "jobs"),
        ("/jobs/{job_id}", pages.job, "job"),
        ("/dead", pages.dead, "dead"),
        ("/dead/confirm", pages.dead_confirm, "dead_confirm"),
        ("/selected", pages.selected_confirm, "selected_confirm"),
        ("/schedules", pages.schedules, "schedules"),
        ("/workers", pages.workers, "workers"),
    ]
    post: list[tuple[str, Callable[[Request], Awaitable[Response]], str]] = [
        ("/jobs/{job_id}/retry", actions.retry_job, "retry_job"),
        ("/jobs/{job_id}/cancel", actions.cancel_job, "cancel_job"),
        ("/dead/{action:str}", actions.dead_bulk, "dead_bulk"),
        ("/selected/{action:str}", actions.selected_bulk, "selected_bulk"),
        ("/queues/{queue}/pause", actions.pause_queue, "pause_queue"),
        ("/queues/{queue}/resume", actions.resume_queue, "resume_queue"),
        ("/queues/{queue}/limits", actions.queue_limits, "queue_limits"),
        ("/prune", actions.prune, "prune"),
    ]
    return [
        *(Route(path, fn, name=name, methods=["GET"]) for path, fn, name in get),
        *(Route(path, fn, name=name, methods=["POST"]) for path, fn, name in post),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]


def create_app(
    app: App,
    *,
    auth: Auth | None = None,
    secret: str | bytes | None = None,
    refresh_s: float = 5.0,
    sample_every_s: float = 60.0,
) -> Starlette:
    """The dashboard of ``app`` as an ASGI app: serve it (``skiplock dashboard``) or mount it
    (``Mount("/skiplock", create_app(app, auth=...))``).

    ``auth``: a callable from a request to a ``User`` (or a role name, or None to refuse);
    see ``basic_auth`` and ``proxy_auth``. None: everyone is a read-only viewer.
    ``secret``: the CSRF key (random per process if None; give one to share across
    processes). ``refresh_s``: how often live pages refresh (0: never).
    ``sample_every_s``: how often the Overview's sparklines are sampled.
    """
    if not isinstance(app, App):
        raise ConfigurationError(f"create_app: app must be a skiplock.App, not {app!r}")
    if auth is not None and not callable(auth):
        raise ConfigurationError(
            f"create_app: auth must be callable (request -> user), not {auth!r}"
        )
    for name, value in (("refresh_s", refresh_s), ("sample_every_s", sample_every_s)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 86400:
            raise ConfigurationError(f"create_app: {name} {value!r}: must be 0 to 86400 seconds")
    if sample_every_s < 1:
        raise ConfigurationError(f"create_app: sample_every_s {sample_every_s!r}: at least 1")
    csrf = Csrf(secret)
    sampler = Sampler(app, sample_every_s)

    @contextlib.asynccontextmanager
    async def lifespan(web: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await sampler.stop()

    web = Starlette(routes=routes(), middleware=[Middleware(_Guard)], lifespan=lifespan)
    web.state.dashboard = Dashboard(app, auth or no_auth, csrf, Renderer(csrf, refresh_s), sampler)
    return web
