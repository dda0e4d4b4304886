"""The skiplock URL built from a Django ``DATABASES`` entry keeps its TLS options (issue 22
medium 4) and its connection service and password file (issue 43). Translation, so it runs in
the core venv without Django, and one real connection through a service file;
tests/django/test_tls.py connects through it to a server that requires TLS and a client
certificate."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

import skiplock
from skiplock._backends.postgres.url import parse_postgres_url
from skiplock.contrib.django._urls import database_url

from .helpers import PG_URL

TLS = {
    "sslmode": "verify-full",
    "sslrootcert": "/etc/certs/root ca&x.crt",
    "sslcert": "/etc/certs/client.crt",
    "sslkey": "/etc/certs/client.key",
    "sslpassword": "p&ss=word",
    "sslcrl": "/etc/certs/crl.pem",
    "ssl_min_protocol_version": "TLSv1.3",
}


def _db(**options: str) -> dict[str, object]:
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "app",
        "USER": "u",
        "HOST": "db.example",
        "PORT": "5433",
        "OPTIONS": options,
    }


def test_every_tls_option_reaches_the_url_asyncpg_connects_with() -> None:
    url = database_url(_db(**TLS), "jobs")
    dsn = parse_postgres_url(url).dsn
    query = {k: v[-1] for k, v in parse_qs(urlsplit(dsn).query).items()}
    assert query == TLS


def test_a_tls_option_asyncpg_cannot_honour_is_refused_not_dropped() -> None:
    with pytest.raises(ValueError, match=r"'sslcrldir'.*cannot honour"):
        database_url(_db(sslmode="verify-full", sslcrldir="/etc/crls"), None)


def test_options_that_are_not_tls_stay_out() -> None:
    url = database_url(_db(sslmode="require", connect_timeout="3", pool="x"), None)
    assert parse_qs(urlsplit(url).query) == {"sslmode": ["require"]}


def test_a_connection_service_and_a_password_file_reach_skiplock_s_connections() -> None:
    """Django hands psycopg ``OPTIONS["service"]``/``passfile``: skiplock's own connections
    use them too (they were dropped: TLS settings kept in a service file were lost)."""
    only_service = {"ENGINE": "django.db.backends.postgresql", "NAME": None, "OPTIONS": {}}
    only_service["OPTIONS"] = {"service": "jobs", "servicefile": "/etc/pg/svc.conf"}
    parsed = parse_postgres_url(database_url(only_service, None))
    assert urlsplit(parsed.dsn).netloc == "" and urlsplit(parsed.dsn).path == ""
    assert parse_qs(urlsplit(parsed.dsn).query) == {"service": ["jobs"]}
    assert parsed.servicefile == "/etc/pg/svc.conf"  # the driver's keyword, not a parameter
    with_file = database_url(_db(passfile="/home/app/.pgpass", sslmode="require"), None)
    assert parse_qs(urlsplit(with_file).query) == {
        "passfile": ["/home/app/.pgpass"],
        "sslmode": ["require"],
    }


async def test_skiplock_connects_through_a_django_connection_service(
    pg_url: str, tmp_path: Path
) -> None:
    """The real server, reached through a service file and nothing else: host, port,
    database and user come from the service, as they do for Django's own connection."""
    server = urlsplit(PG_URL)
    (tmp_path / "pg_service.conf").write_text(
        "[skiplock_test]\n"
        f"host={server.hostname}\nport={server.port or 5432}\n"
        f"dbname={server.path.lstrip('/')}\nuser={server.username}\n"
    )
    schema = parse_qs(urlsplit(pg_url).query)["schema"][0]
    options = {"service": "skiplock_test", "servicefile": str(tmp_path / "pg_service.conf")}
    db = {"ENGINE": "django.db.backends.postgresql", "NAME": None, "OPTIONS": options}
    app = skiplock.App(database_url(db, schema))
    try:
        await app.migrate()

        @app.task(name="through_service")
        async def through_service() -> None: ...

        await through_service.aenqueue()
        assert (await app.counts())["pending"] == 1
    finally:
        await app.close()
