"""skiplock's own options in a PostgreSQL URL, split off before the URL reaches asyncpg.

asyncpg passes unknown query parameters to the server as settings, so every option below is
removed from the URL it connects with; the rest (``sslmode``, ``sslrootcert``, ``options``,
``application_name``...) goes through untouched, which is how TLS and server settings for a
managed service are chosen.

- ``schema=NAME``: the schema holding skiplock's tables (default ``public``).
- ``pooler=transaction``: the URL reaches PostgreSQL through a transaction-pooling pooler
  (PgBouncer ``pool_mode = transaction``), where consecutive transactions of one client may
  run on different server sessions. skiplock then keeps no session state: no prepared
  statements cached by name, no session settings (the claim's ``enable_sort = off`` becomes
  ``SET LOCAL`` in the claim's transaction), and no LISTEN through the pooler.
- ``connect_timeout=SECONDS``: how long opening a connection may take before it counts as an
  outage (default 10 s; asyncpg's own 60 s left a CLI command against a server that accepts TCP
  and never answers silent for a minute).
- ``listen_url=postgresql://...``: a direct connection (bypassing the pooler) for LISTEN. With
  ``pooler=transaction`` and no ``listen_url``, workers run poll-only: a job is picked up within
  ``poll_interval_s`` instead of at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

from ..._url import mask_url
from ...errors import ConfigurationError

DEFAULT_CONNECT_TIMEOUT_S = 10.0
MAX_CONNECT_TIMEOUT_S = 3600.0

POOLERS = ("transaction",)
"""The values ``pooler=`` accepts. Session pooling needs nothing: it is a direct connection."""


@dataclass(frozen=True, repr=False)
class PostgresUrl:
    """A skiplock PostgreSQL URL taken apart: what asyncpg gets, and skiplock's options."""

    dsn: str
    """The URL asyncpg connects with: skiplock's options removed, the rest kept."""
    schema: str
    pooled: bool
    """True behind a transaction pooler (``pooler=transaction``)."""
    listen_dsn: str | None
    """Where LISTEN connects: ``listen_url``; else ``dsn`` when direct; None means poll-only."""
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    servicefile: str | None = None
    """``servicefile=``: where asyncpg reads the ``service=`` named in the URL (libpq's
    connection service file; default ``PGSERVICEFILE`` or ``~/.pg_service.conf``). A keyword of
    the driver's, not a URL parameter it takes, so it is split off like skiplock's own."""

    def __repr__(self) -> str:
        """The URLs masked: a repr lands in logs, tracebacks and debuggers."""
        listen = None if self.listen_dsn is None else mask_url(self.listen_dsn)
        return (
            f"PostgresUrl(dsn={mask_url(self.dsn)!r}, schema={self.schema!r}, "
            f"pooled={self.pooled!r}, listen_dsn={listen!r}, "
            f"connect_timeout_s={self.connect_timeout_s!r}, servicefile={self.servicefile!r})"
        )


def parse_postgres_url(url: str) -> PostgresUrl:
    """Split skiplock's options off ``url``, checking each (errors name the option)."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    schema = _last(query, "schema") or "public"
    if not schema.replace("_", "").isalnum():
        raise ConfigurationError(
            f"url={mask_url(url)!r}: schema {schema!r} must be letters, digits and _"
        )
    pooler = _last(query, "pooler")
    if pooler is not None and pooler not in POOLERS:
        raise ConfigurationError(
            f"url: pooler={pooler!r} is not supported; use pooler=transaction (PgBouncer's "
            "transaction pooling) or leave it out for a direct or session-pooled connection"
        )
    timeout = _connect_timeout(_last(query, "connect_timeout"), url)
    servicefile = _last(query, "servicefile")
    listen_url = _last(query, "listen_url")
    if listen_url is not None and urlsplit(listen_url).scheme not in ("postgresql", "postgres"):
        raise ConfigurationError("url: listen_url must be a postgresql:// URL")
    # Re-encoded: parse_qs decoded the values, and a value holding "&" or "=" written back raw
    # would become parameters of its own (a path "x&sslmode=disable" turning TLS off).
    rest = urlencode([(k, v) for k, vs in query.items() for v in vs])
    dsn = parts._replace(query=rest, scheme="postgresql").geturl()
    listen = listen_url.replace("postgres://", "postgresql://", 1) if listen_url else None
    listen_dsn = listen or (None if pooler else dsn)
    return PostgresUrl(dsn, schema, pooler is not None, listen_dsn, timeout, servicefile)


def _connect_timeout(text: str | None, url: str) -> float:
    if text is None:
        return DEFAULT_CONNECT_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_CONNECT_TIMEOUT_S:
        raise ConfigurationError(
            f"url={mask_url(url)!r}: connect_timeout={text!r} must be seconds in "
            f"(0, {MAX_CONNECT_TIMEOUT_S:g}]"
        )
    return seconds


def _last(query: dict[str, list[str]], name: str) -> str | None:
    values = query.pop(name, None)
    return values[-1] if values else None
