"""The App refuses a schema a newer skiplock wrote, and never shows a password (issue 9 items
16 and 17), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import asyncpg
import pytest

import skiplock
from skiplock._backends import sqlite_sql
from skiplock._backends.postgres_url import parse_postgres_url
from skiplock._url import mask_url

from .conftest import PG_URL
from .test_cli import Cli

LATEST = sqlite_sql.MIGRATIONS[-1][0]
"""The schema version this skiplock migrates to (the same on both backends)."""


def newer_schema(url: str, version: int = 99) -> None:
    """Record a migration this skiplock does not know, as a newer skiplock would."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute(
                "INSERT INTO skiplock_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, "from the future", "2030-01-01T00:00:00+00:00"),
            )
        return
    schema = parse_qs(urlsplit(url).query)["schema"][0]

    async def insert() -> None:
        conn = await asyncpg.connect(PG_URL)
        try:
            await conn.execute(
                f'INSERT INTO "{schema}".skiplock_migrations (version, name) VALUES ($1, $2)',
                version,
                "from the future",
            )
        finally:
            await conn.close()

    asyncio.run(insert())


async def test_producers_and_migrate_refuse_a_newer_schema(db_url: str) -> None:
    app = skiplock.App(db_url)

    @app.task
    async def noop() -> None: ...

    await app.migrate()
    await app.close()
    await asyncio.to_thread(newer_schema, db_url)
    for attempt in (noop.aenqueue, app.migrate, app.queues):
        with pytest.raises(skiplock.SchemaError, match=f"99, newer than this skiplock's {LATEST}"):
            await attempt()
    await app.close()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:s3cret@db:5432/app", "postgresql://u:***@db:5432/app"),
        ("postgresql://u:p@ss@db/app?schema=x", "postgresql://u:***@db/app?schema=x"),
        ("postgresql://:s3cret@db/app", "postgresql://:***@db/app"),
        (
            "postgresql://db/app?user=u&password=s3cret&x=1",
            "postgresql://db/app?user=u&password=***&x=1",
        ),
        ("postgresql://u@db/app", "postgresql://u@db/app"),
        ("sqlite:///var/jobs.db", "sqlite:///var/jobs.db"),
        # issue 22 low 7: libpq's key passphrase, and a listen_url percent-encoded in the query
        (
            "postgresql://u@db/app?sslkey=/k&sslpassword=s3cret",
            "postgresql://u@db/app?sslkey=/k&sslpassword=***",
        ),
        (
            "postgresql://u@pool/app?pooler=transaction"
            "&listen_url=postgresql%3A%2F%2Fu%3As3cret%40db%2Fapp",
            "postgresql://u@pool/app?pooler=transaction&listen_url=postgresql://u:***@db/app",
        ),
        (
            "postgresql://u@pool/app?listen_url=postgresql://u:s3cret@db/app%3Fsslpassword%3Dk3y",
            "postgresql://u@pool/app?listen_url=postgresql://u:***@db/app?sslpassword%3D***",
        ),
    ],
)
def test_mask_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown
    assert "s3cret" not in mask_url(url) and "k3y" not in mask_url(url)


def test_the_query_is_re_encoded_when_skiplock_s_options_are_split_off() -> None:
    # A value holding "&sslmode=disable" stays one value: it must not turn TLS off.
    parsed = parse_postgres_url(
        "postgresql://u@db/app?schema=jobs&sslrootcert=%2Fx%26sslmode%3Ddisable&sslmode=verify-full"
    )
    query = parse_qs(urlsplit(parsed.dsn).query)
    assert query == {"sslrootcert": ["/x&sslmode=disable"], "sslmode": ["verify-full"]}


def test_repr_and_errors_mask_sslpassword_and_an_encoded_listen_url() -> None:
    url = (
        "postgresql://u@db/app?sslpassword=hunter2&pooler=transaction"
        "&listen_url=postgresql%3A%2F%2Fu%3Ahunter3%40db%2Fapp&schema=no-dashes"
    )
    with pytest.raises(skiplock.ConfigurationError) as caught:
        skiplock.App(url)
    assert "hunter2" not in str(caught.value) and "hunter3" not in str(caught.value)
    good = skiplock.App(url.replace("&schema=no-dashes", ""))
    assert "hunter2" not in repr(good) and "hunter3" not in repr(good)


async def test_schema_errors_and_repr_mask_the_password(pg_url: str) -> None:
    """The local server trusts connections, so a password in the URL is accepted, unused."""
    app = skiplock.App(pg_url.replace("://postgres@", "://postgres:hunter2@"))
    assert "hunter2" not in repr(app) and "postgres:***@" in repr(app)
    with pytest.raises(skiplock.SchemaError) as caught:
        await app.check_schema()  # never migrated
    assert "hunter2" not in str(caught.value) and "postgres:***@" in str(caught.value)
    await app.close()


def test_a_bad_url_is_reported_without_its_password(tmp_path: Path) -> None:
    bad = "postgresql://ops:hunter2@db/app?schema=no-dashes"
    with pytest.raises(skiplock.ConfigurationError) as caught:
        skiplock.App(bad)
    assert "hunter2" not in str(caught.value) and "ops:***@db" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # not shown
    result = Cli(f"sqlite:///{tmp_path / 'jobs.db'}", tmp_path).run("queue", "list", "--url", bad)
    assert result.returncode == 2 and "schema 'no-dashes'" in result.stderr, result.stderr
    assert "hunter2" not in result.stderr + result.stdout
