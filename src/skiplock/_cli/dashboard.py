"""``skiplock dashboard APP`` (serve the web dashboard) and ``skiplock hash-password``.

The dashboard's packages are an extra (``skiplock[dashboard]``), imported only here and only
when the command runs, so the core CLI never needs them.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import socket
import ssl
import sys
import tomllib
from pathlib import Path
from typing import Any

import click

from ..errors import ConfigurationError
from .support import (
    CANNOT_RUN,
    CliError,
    Seconds,
    configure_logging,
    load_app,
    log_level_option,
    run_async,
)

log = logging.getLogger("skiplock.dashboard")

MISSING_EXTRA = "the dashboard needs its extra: pip install 'skiplock[dashboard]'"


def _dashboard_module() -> Any:
    try:
        import uvicorn  # noqa: F401

        from .. import dashboard
    except ImportError as exc:
        raise CliError(f"{MISSING_EXTRA} ({exc})", CANNOT_RUN) from exc
    return dashboard


def _users(path: Path) -> dict[str, tuple[str, str]]:
    """A TOML users file: ``[users.NAME]`` tables with ``role`` and ``password`` (a hash)."""
    with contextlib.suppress(OSError):  # unreadable: the read below says so
        if path.stat().st_mode & 0o077:
            # scrypt hashes are slow to crack, not impossible: another account on the host
            # should not get to try.
            log.warning(
                "--users %s is readable by others (mode %o): chmod 600 it",
                path,
                path.stat().st_mode & 0o777,
            )
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CliError(f"--users {path}: {exc}", CANNOT_RUN) from exc
    users = data.get("users")
    if not isinstance(users, dict) or not users:
        raise CliError(f"--users {path}: expected [users.NAME] tables with role and password")
    table: dict[str, tuple[str, str]] = {}
    for name, entry in users.items():
        if not isinstance(entry, dict) or not {"role", "password"} <= entry.keys():
            raise CliError(f"--users {path}: [users.{name}] needs role and password", CANNOT_RUN)
        table[name] = (str(entry["role"]), str(entry["password"]))
    return table


def _auth(
    dashboard: Any,
    users: Path | None,
    proxy_header: str | None,
    role_header: str | None,
    trusted: str,
    proxy_secret: str | None,
    session_s: float,
) -> Any:
    if users and proxy_header:
        raise CliError("--users and --proxy-header: choose one way to sign in", CANNOT_RUN)
    if proxy_secret and not proxy_header:
        raise CliError("--proxy-secret: only with --proxy-header", CANNOT_RUN)
    try:
        if users:
            return dashboard.basic_auth(_users(users), session_s=session_s)
        if proxy_header:
            if not proxy_secret:
                # without it any process on the proxy's host could name itself admin
                raise CliError(
                    "--proxy-header needs --proxy-secret (or SKIPLOCK_DASHBOARD_PROXY_SECRET): "
                    f"the proxy sends it in {dashboard.PROXY_SECRET_HEADER} on every request",
                    CANNOT_RUN,
                )
            return dashboard.proxy_auth(
                proxy_header,
                role_header=role_header,
                trusted=[t.strip() for t in trusted.split(",") if t.strip()],
                secret=proxy_secret,
            )
    except ConfigurationError as exc:
        raise CliError(str(exc), CANNOT_RUN) from exc
    return None


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
"""The Host names ``skiplock dashboard`` answers to unless ``--allowed-host`` adds more."""


def _allowed_hosts(host: str, extra: tuple[str, ...]) -> list[str] | None:
    """Loopback names, the bound address when it is a specific one, and ``--allowed-host``."""
    if "*" in extra:
        return None
    hosts = [*LOOPBACK_NAMES, *extra]
    if host not in ("0.0.0.0", "::", ""):
        hosts.append(host)
    return hosts


def _check_tls(certfile: Path, keyfile: Path) -> None:
    """Load the pair now: a wrong file is one line here, not a traceback from the server."""
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except (ssl.SSLError, OSError) as exc:
        raise CliError(f"--certfile {certfile} / --keyfile {keyfile}: {exc}", CANNOT_RUN) from exc


def _listen(host: str, port: int) -> socket.socket:
    """The dashboard's listening socket, bound here rather than by uvicorn: a port in use
    (or an address this machine does not have) is then one ``Error:`` line and exit 2, where
    uvicorn logs the OSError itself and exits 1."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise CliError(f"--host {host}: {exc.strerror or exc}", CANNOT_RUN) from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = "already in use" if exc.errno == errno.EADDRINUSE else exc.strerror or exc
        raise CliError(f"--host {host} --port {port}: cannot listen: {reason}", CANNOT_RUN) from exc
    return sock


def _behind_proxies(web: Any, forwarded_allow_ips: str | None) -> Any:
    """``--proxy-headers``: uvicorn's proxy-headers middleware, applied here rather than by
    uvicorn so that the TCP peer is kept first (``PEER`` in the scope). The client address
    then becomes the person's (rate limits, logs, the audit trail), and proxy sign-in still
    compares ``--proxy-trusted`` with the proxy itself: with uvicorn's own option it compared
    the person's address, and refused everyone."""
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    from ..dashboard.auth import PEER

    # the same default as uvicorn's own option
    trusted = forwarded_allow_ips or os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
    rewrite = ProxyHeadersMiddleware(web, trusted_hosts=trusted)

    async def keep_peer(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            scope[PEER] = scope.get("client")
        await rewrite(scope, receive, send)

    return keep_peer


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@click.command(name="dashboard")
@click.argument("app_spec", metavar="APP")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="Port to listen on.",
)
@click.option(
    "--users",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TOML file of [users.NAME] role/password-hash tables (HTTP basic sign-in).",
)
@click.option("--proxy-header", help="Trust a reverse proxy naming the user in this header.")
@click.option(
    "--proxy-role-header",
    help="With --proxy-header: the header naming the user's role (else viewer).",
)
@click.option(
    "--proxy-trusted",
    default="127.0.0.1,::1",
    show_default=True,
    help="Proxy addresses whose headers are believed (comma-separated).",
)
@click.option(
    "--proxy-secret",
    envvar="SKIPLOCK_DASHBOARD_PROXY_SECRET",
    help="With --proxy-header: the secret the proxy sends in X-Skiplock-Proxy-Secret "
    "(at least 16 characters; better from SKIPLOCK_DASHBOARD_PROXY_SECRET than the command line).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A Host name it answers to besides localhost, 127.0.0.1, ::1 and --host "
    "(repeat; *.example.com for a domain; * for any). Others get 400.",
)
@click.option(
    "--proxy-headers",
    is_flag=True,
    help="Believe X-Forwarded-For/-Proto from --forwarded-allow-ips (off: the client "
    "address is the TCP peer).",
)
@click.option(
    "--forwarded-allow-ips",
    help="With --proxy-headers: the proxy addresses whose X-Forwarded-* are believed "
    "(comma-separated; default 127.0.0.1).",
)
@click.option(
    "--certfile",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Serve HTTPS with this certificate (PEM; with --keyfile).",
)
@click.option(
    "--keyfile",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The certificate's private key (PEM).",
)
@click.option(
    "--session",
    type=Seconds(60, 30 * 86400),
    default=8 * 3600.0,
    show_default="8 hours",
    help="With --users: seconds a sign-in lasts before the browser asks again.",
)
@click.option(
    "--refresh",
    type=Seconds(0, 3600),
    default=5.0,
    show_default=True,
    help="Seconds between live refreshes of the Overview and Workers pages (0: off).",
)
@click.option(
    "--sample-every",
    type=Seconds(1, 3600),
    default=60.0,
    show_default=True,
    help="Seconds between the Overview sparklines' samples (an hour of them is kept).",
)
@log_level_option
def dashboard_command(
    app_spec: str,
    host: str,
    port: int,
    users: Path | None,
    proxy_header: str | None,
    proxy_role_header: str | None,
    proxy_trusted: str,
    proxy_secret: str | None,
    allowed_hosts: tuple[str, ...],
    proxy_headers: bool,
    forwarded_allow_ips: str | None,
    certfile: Path | None,
    keyfile: Path | None,
    session: float,
    refresh: float,
    sample_every: float,
    log_level: str,
    log_format: str,
) -> None:
    """Serve APP's web dashboard. Without --users or --proxy-header everyone is a read-only
    viewer; it binds 127.0.0.1 unless --host says otherwise."""
    configure_logging(log_level, log_format)
    dashboard = _dashboard_module()
    import uvicorn

    app = load_app(app_spec)
    if bool(certfile) != bool(keyfile):
        raise CliError("--certfile and --keyfile: give both (HTTPS) or neither", CANNOT_RUN)
    if certfile and keyfile:
        _check_tls(certfile, keyfile)
    auth = _auth(
        dashboard, users, proxy_header, proxy_role_header, proxy_trusted, proxy_secret, session
    )
    if users and not certfile and not _loopback(host):
        log.warning(
            "--users on %s without TLS: passwords cross the network readable by anyone on "
            "the path; give --certfile/--keyfile or put a TLS proxy in front",
            host,
        )
    if forwarded_allow_ips and not proxy_headers:
        raise CliError("--forwarded-allow-ips: only with --proxy-headers", CANNOT_RUN)
    if auth is None and not _loopback(host):
        log.warning(
            "no sign-in configured and bound to %s: anyone who can reach it sees "
            "every queue (read-only)",
            host,
        )
    secret = os.environ.get("SKIPLOCK_DASHBOARD_SECRET") or None
    try:
        web = dashboard.create_app(
            app,
            auth=auth,
            secret=secret,
            refresh_s=refresh,
            sample_every_s=sample_every,
            allowed_hosts=_allowed_hosts(host, allowed_hosts),
        )
    except ConfigurationError as exc:
        said = (
            str(exc).removeprefix("create_app: ").replace("secret:", "SKIPLOCK_DASHBOARD_SECRET:")
        )
        raise CliError(said, CANNOT_RUN) from exc

    async def serve() -> None:
        await app.check_schema()  # a database to migrate fails here, in one line
        sock = _listen(host, port)
        config = uvicorn.Config(
            _behind_proxies(web, forwarded_allow_ips) if proxy_headers else web,
            host=host,
            port=port,
            log_level=log_level.lower(),
            # never uvicorn's own: it is on by default and takes the client address from
            # X-Forwarded-For (FORWARDED_ALLOW_IPS=* believed anyone); --proxy-headers wraps
            # the app in it above, keeping the TCP peer for proxy sign-in
            proxy_headers=False,
            ssl_certfile=str(certfile) if certfile else None,
            ssl_keyfile=str(keyfile) if keyfile else None,
        )
        scheme = "https" if certfile else "http"
        log.info("skiplock dashboard on %s://%s:%d", scheme, host, sock.getsockname()[1])
        with sock:
            await uvicorn.Server(config).serve(sockets=[sock])

    run_async(app, serve, exit_code=CANNOT_RUN)


def _password(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The password given: none yet with --password-stdin (read later), else prompted."""
    if value is not None or ctx.params.get("from_stdin"):
        return value
    return str(click.prompt("Password", hide_input=True, confirmation_prompt=True))


@click.command(name="hash-password")
@click.option(
    "--password-stdin",
    "from_stdin",
    is_flag=True,
    is_eager=True,
    help="Read the password from standard input (its first line), not a prompt or argv.",
)
@click.option(
    "--password",
    callback=_password,
    help="The password (prompted, hidden, twice, when not given). Prefer the prompt or "
    "--password-stdin: every user of the host can read a command line.",
)
def hash_password_command(password: str | None, from_stdin: bool) -> None:
    """Print a scrypt hash of a password for the dashboard's --users file."""
    try:
        from ..dashboard.auth import hash_password
    except ImportError as exc:
        raise CliError(f"{MISSING_EXTRA} ({exc})", CANNOT_RUN) from exc
    if from_stdin:
        if password is not None:
            raise CliError("--password and --password-stdin: give one", CANNOT_RUN)
        password = sys.stdin.readline().rstrip("\r\n")
    assert password is not None
    try:
        click.echo(hash_password(password))
    except ConfigurationError as exc:
        raise CliError(str(exc), CANNOT_RUN) from exc
