"""``create_app``: the dashboard as an ASGI app (Starlette), to serve alone or mount.

Every request is authenticated first (the auth callable decides who is asking; None is a
401), then routed; every response carries the security headers (a strict CSP among them).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from .._app import App
from ..errors import ConfigurationError
from . import actions, pages
from .audit import REFUSALS_STORED_PER_MINUTE, audit_refusal
from .auth import EXPIRED, Auth, SignInThrottled, no_auth, resolve, signed_in_name
from .render import Renderer
from .sampler import Sampler
from .security import SECURITY_HEADERS, STRICT_TRANSPORT_SECURITY, Csrf
from .state import Dashboard

log = logging.getLogger("skiplock.dashboard")

STATIC = Path(__file__).parent / "static"


class _Guard(BaseHTTPMiddleware):
    """Decides who is asking before any route runs, and sets the security headers."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        dash: Dashboard = request.app.state.dashboard
        request.state.user = None  # nobody until the auth says who: a page never runs as someone
        # The routed path, never request.url: that one is rebuilt from the Host header, which
        # the client writes (``Host: a/static/?x=`` made any page look like a static file).
        if _static(request.scope):
            response = await call_next(request)
            response.headers.update(SECURITY_HEADERS)
            response.headers["Cache-Control"] = "public, max-age=3600"  # no data in them
            return response
        if _routed(request.scope, "/signout"):
            response = await sign_out(request)  # decides for itself: see there
        else:
            response = await self._authenticated(dash, request, call_next)
        response.headers.update(SECURITY_HEADERS)
        if request.scope.get("scheme") == "https":  # TLS here, or a proxy's it was told of
            response.headers["Strict-Transport-Security"] = STRICT_TRANSPORT_SECURITY
        return response

    async def _authenticated(
        self, dash: Dashboard, request: Request, call_next: RequestResponseEndpoint
    ) -> Response:
        try:
            user = await resolve(dash.auth, request)
        except ConfigurationError as exc:  # e.g. a proxy header naming no role
            return PlainTextResponse(f"Refused: {exc}", status_code=403)
        except SignInThrottled as exc:
            return PlainTextResponse(
                f"Refused: {exc}.",
                status_code=429,
                headers={"Retry-After": str(exc.retry_after_s)},
            )
        if user is None:
            await _record_refused_sign_in(dash, request)
            challenge = getattr(dash.auth, "challenge", None)
            headers = {"WWW-Authenticate": challenge} if challenge else {}
            return PlainTextResponse(
                "Sign in to see the skiplock dashboard.", status_code=401, headers=headers
            )
        request.state.user = user
        response = await call_next(request)
        if request.cookies.get(SIGNED_OUT_COOKIE):  # signed in again: the next Sign out works
            response.delete_cookie(SIGNED_OUT_COOKIE, path=request.scope.get("root_path") or "/")
        return response


async def _record_refused_sign_in(dash: Dashboard, request: Request) -> None:
    """A request that named someone (basic credentials, a proxy's user header) and was
    refused goes to the audit trail; one that named nobody is only asked to sign in."""
    if request.scope.get(EXPIRED):
        return
    header = getattr(dash.auth, "user_header", None)
    name = signed_in_name(request) or (request.headers.get(header, "") if header else "")
    if not name:
        return
    client = request.client.host if request.client else "?"
    # under the cap a flood meets (a proxy auth has no rate limit of its own)
    await audit_refusal(dash, None, "sign-in refused", name, f"client {client}")


def _static(scope: Scope) -> bool:
    """Whether the router sends this request to the static files (no data, no sign-in)."""
    path: str = scope["path"]
    return path.startswith(f"{scope.get('root_path', '')}/static/")


def _routed(scope: Scope, route: str) -> bool:
    return bool(scope["path"] == f"{scope.get('root_path', '')}{route}")


SIGNED_OUT_COOKIE = "skiplock_signed_out"

REFUSED_SIGN_INS_STORED = REFUSALS_STORED_PER_MINUTE
"""Refused sign-ins stored in the audit trail a minute, at most (with refused actions);
past it they are counted in the log."""


async def sign_out(request: Request) -> Response:
    """``GET /signout``: forget the sign-in and answer 401, which makes a browser drop the
    basic credentials it kept. A cookie marks the browser as just signed out, so credentials
    typed into the prompt that follows sign in again (to the Overview) instead of being
    refused in a loop. An auth without sessions (a proxy's) has its own sign-out."""
    dash: Dashboard = request.app.state.dashboard
    forget = getattr(dash.auth, "sign_out", None)
    if forget is None:
        return PlainTextResponse(
            "This dashboard's sign-in has no session of its own: sign out where you signed in "
            "(your proxy or single sign-on).",
            status_code=404,
        )
    root = request.scope.get("root_path", "") or "/"
    if request.cookies.get(SIGNED_OUT_COOKIE):
        try:
            user = await resolve(dash.auth, request)
        except (ConfigurationError, SignInThrottled):
            user = None
        if user is not None:
            again = RedirectResponse(str(request.url_for("overview")), status_code=303)
            again.delete_cookie(SIGNED_OUT_COOKIE, path=root)
            return again
    forget(request)
    challenge = getattr(dash.auth, "challenge", None)
    response = PlainTextResponse(
        "Signed out. To sign in again, open the dashboard and give your name and password.",
        status_code=401,
        headers={"WWW-Authenticate": challenge} if challenge else {},
    )
    response.set_cookie(
        SIGNED_OUT_COOKIE,
        "1",
        max_age=600,
        path=root,
        httponly=True,
        samesite="strict",
        secure=request.scope.get("scheme") == "https",
    )
    return response


class _NameConvertor(Convertor[str]):
    """A queue name in a path: any text (``a/b``, ``100%``, ``what?``, ``#1``...). Written
    percent-encoded, every ``/`` too; read back from the ASGI path, which the server has
    already decoded, so a ``/`` in the name routes (the pattern takes the rest of the path)."""

    regex = ".+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return quote(str(value), safe="")


class _DeadVerbConvertor(Convertor[str]):
    regex = "requeue|discard"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


class _LinkedSideConvertor(Convertor[str]):
    regex = "parents|children"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("skiplock_name", _NameConvertor())
register_url_convertor("skiplock_dead_verb", _DeadVerbConvertor())
register_url_convertor("skiplock_linked_side", _LinkedSideConvertor())


def routes() -> list[Route | Mount]:
    get: list[tuple[str, Callable[[Request], Awaitable[Response]], str]] = [
        ("/", pages.overview, "overview"),
        ("/jobs", pages.jobs, "jobs"),
        ("/jobs/{job_id}", pages.job, "job"),
        ("/jobs/{job_id}/{side:skiplock_linked_side}", pages.linked, "linked"),
        ("/waiting", pages.waiting, "waiting"),
        ("/dead", pages.dead, "dead"),
        ("/dead/confirm", pages.dead_confirm, "dead_confirm"),
        ("/selected", pages.selected_confirm, "selected_confirm"),
        ("/schedules", pages.schedules, "schedules"),
        ("/workers", pages.workers, "workers"),
        ("/signout", sign_out, "signout"),  # the guard answers it: routed for url_for
    ]
    post: list[tuple[str, Callable[[Request], Awaitable[Response]], str]] = [
        ("/jobs/{job_id}/retry", actions.retry_job, "retry_job"),
        ("/jobs/{job_id}/cancel", actions.cancel_job, "cancel_job"),
        ("/jobs/{job_id}/signal", actions.send_signal, "signal_job"),
        # only the two verbs route: any other is a 404, never a discard
        ("/dead/{action:skiplock_dead_verb}", actions.dead_bulk, "dead_bulk"),
        ("/selected/{action:str}", actions.selected_bulk, "selected_bulk"),
        ("/queues/{queue:skiplock_name}/pause", actions.pause_queue, "pause_queue"),
        ("/queues/{queue:skiplock_name}/resume", actions.resume_queue, "resume_queue"),
        ("/queues/{queue:skiplock_name}/limits", actions.queue_limits, "queue_limits"),
        ("/prune", actions.prune, "prune"),
    ]
    return [
        *(Route(path, fn, name=name, methods=["GET"]) for path, fn, name in get),
        *(Route(path, fn, name=name, methods=["POST"]) for path, fn, name in post),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]


def _ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


def _hosts(allowed: Iterable[str] | None) -> list[str] | None:
    """The Host allow-list as TrustedHostMiddleware reads it: lower case, IPv6 in brackets."""
    if allowed is None:
        return None
    if isinstance(allowed, str):
        allowed = [allowed]
    hosts = []
    for host in allowed:
        if not isinstance(host, str) or not host.strip() or "/" in host:
            raise ConfigurationError(
                f"create_app: allowed host {host!r}: must be a host name or address "
                "(e.g. dash.example.com, 10.0.0.5, *.example.com or *)"
            )
        host = host.strip().lower()
        if _ipv6(host):
            host = f"[{host}]"  # the Host header brackets IPv6
        elif ":" in host and not host.startswith("["):
            raise ConfigurationError(
                f"create_app: allowed host {host!r}: a name or address without the port"
            )
        if "*" in host[1:] or (host.startswith("*") and host != "*" and not host.startswith("*.")):
            raise ConfigurationError(
                f"create_app: allowed host {host!r}: a wildcard is * or *.domain"
            )
        hosts.append(host)
    if not hosts:
        raise ConfigurationError("create_app: allowed_hosts is empty: nobody could reach it")
    return hosts


def create_app(
    app: App,
    *,
    auth: Auth | None = None,
    secret: str | bytes | None = None,
    refresh_s: float = 5.0,
    sample_every_s: float = 60.0,
    allowed_hosts: Iterable[str] | None = None,
) -> Starlette:
    """The dashboard of ``app`` as an ASGI app: serve it (``skiplock dashboard``) or mount it
    (``Mount("/skiplock", create_app(app, auth=...))``).

    ``auth``: a callable from a request to a ``User`` (or a role name, or None to refuse);
    see ``basic_auth`` and ``proxy_auth``. None: everyone is a read-only viewer.
    ``secret``: the CSRF key (random per process if None; give one to share across
    processes). ``refresh_s``: how often live pages refresh (0: never).
    ``sample_every_s``: how often the Overview's sparklines are sampled.
    ``allowed_hosts``: the host names (``Host`` header, without the port) it answers to; any
    other gets 400, which is what stops a DNS-rebinding page from reaching it through a
    browser on the same machine. None: any (the app it is mounted in decides);
    ``skiplock dashboard`` gives loopback names unless told more.
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
    hosts = _hosts(allowed_hosts)
    csrf = Csrf(secret)
    sampler = Sampler(app, sample_every_s)

    @contextlib.asynccontextmanager
    async def lifespan(web: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await sampler.aclose()

    middleware = [Middleware(_Guard)]
    if hosts is not None:
        middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=hosts))
    web = Starlette(routes=routes(), middleware=middleware, lifespan=lifespan)
    web.state.dashboard = Dashboard(app, auth or no_auth, csrf, Renderer(csrf, refresh_s), sampler)
    return web
