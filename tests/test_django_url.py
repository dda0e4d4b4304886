"""The skiplock URL built from a Django ``DATABASES`` entry keeps its TLS options (issue 22
medium 4). Pure translation, so it runs in the core venv without Django; tests/django/test_tls.py
connects through it to a server that requires TLS and a client certificate."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from skiplock._backends.postgres_url import parse_postgres_url
from skiplock.contrib.django._urls import database_url

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
