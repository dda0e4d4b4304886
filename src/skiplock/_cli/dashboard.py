"""``skiplock dashboard APP`` (serve the web dashboard) and ``skiplock hash-password``.

The dashboard's packages are an extra (``skiplock[dashboard]``), imported only here and only
when the command runs, so the core CLI never needs them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
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
) -> Any:
    if users and proxy_header:
        raise CliError("--users and --proxy-header: choose one way to sign in", CANNOT_RUN)
    try:
        if users:
            return dashboard.basic_auth(_users(users))
        if proxy_header:
            return dashboard.proxy_auth(
                proxy_header,
                role_header=role_header,
                trusted=[t.strip() for t in trusted.split(",") if t.strip()],
            )
    except ConfigurationError as exc:
        raise CliError(str(exc), CANNOT_RUN) from exc
    return None


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@click.command(name="dashboard")
@click.argument("app_spec", metavar="APP")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option(
    "--users",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TOML file of [users.NAME] role/password-hash tables (HTTP basic sign-in).",
)
@click.option("--proxy-header", help="Trust a reverse proxy naming the user in this header.")
@click.option("--proxy-role-header", help="...and their role in this one (else viewer).")
@click.option(
    "--proxy-trusted",
    default="127.0.0.1,::1",
    show_default=True,
    help="Proxy addresses whose headers are believed (comma-separated).",
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
    auth = _auth(dashboard, users, proxy_header, proxy_role_header, proxy_trusted)
    if auth is None and not _loopback(host):
        log.warning(
            "no sign-in configured and bound to %s: anyone who can reach it sees "
            "every queue (read-only)",
            host,
        )
    secret = os.environ.get("SKIPLOCK_DASHBOARD_SECRET") or None
    web = dashboard.create_app(
        app, auth=auth, secret=secret, refresh_s=refresh, sample_every_s=sample_every
    )

    async def serve() -> None:
        await app.check_schema()  # a database to migrate fails here, in one line
        config = uvicorn.Config(web, host=host, port=port, log_level=log_level.lower())
        log.info("skiplock dashboard on http://%s:%d", host, port)
        await uvicorn.Server(config).serve()

    run_async(app, serve, exit_code=CANNOT_RUN)


@click.command(name="hash-password")
@click.password_option(help="The password (prompted, hidden, twice, when not given).")
def hash_password_command(password: str) -> None:
    """Print a scrypt hash of a password for the dashboard's --users file."""
    try:
        from ..dashboard.auth import hash_password
    except ImportError as exc:
        raise CliError(f"{MISSING_EXTRA} ({exc})", CANNOT_RUN) from exc
    try:
        click.echo(hash_password(password))
    except ConfigurationError as exc:
        raise CliError(str(exc), CANNOT_RUN) from exc
