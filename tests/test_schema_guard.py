"""The App refuses a schema a newer skiplock wrote, and never shows a password (issue 9 items
16 and 17), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import asyncpg
import pytest

import skiplock
from skiplock._backends.postgres.url import parse_postgres_url
from skiplock._url import mask_url

from .conftest import PG_URL
from .helpers import LATEST_PG, Cli, latest, newer_schema


async def test_producers_and_migrate_refuse_a_newer_schema(db_url: str) -> None:
    app = skiplock.App(db_url)

    @app.task
    async def noop() -> None: ...

    await app.migrate()
    await app.close()
    await asyncio.to_thread(newer_schema, db_url)
    for attempt in (noop.aenqueue, app.migrate, app.queues):
        with pytest.raises(
            skiplock.SchemaError, match=f"99, newer than this skiplock's {latest(db_url)}"
        ):
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
        # issue 43: a password holding "/" or "\\" (the URL then reads wrong, and is quoted
        # raw), and a port that is not a password
        ("postgresql://u:s3/cret@db/app", "postgresql://u:***@db/app"),
        ("mysql://u:s3\\cret@db/app", "mysql://u:***@db/app"),
        (
            "postgresql://db:5432/app?application_name=a@b",
            "postgresql://db:5432/app?application_name=a@b",
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


def test_an_unsupported_scheme_and_a_parsed_url_never_show_the_password() -> None:
    with pytest.raises(skiplock.ConfigurationError) as caught:
        skiplock.App("mysql://ops:hunter\\2@db/app")  # a backslash: repr() doubles it
    assert "hunter" not in str(caught.value) and "ops:***@db" in str(caught.value)
    parsed = parse_postgres_url(
        "postgresql://ops:hunter2@db/app?listen_url=postgresql://o:hunter3@d/a"
    )
    assert "hunter" not in repr(parsed) and "ops:***@db" in repr(parsed)
    assert parsed.dsn == "postgresql://ops:hunter2@db/app"  # what asyncpg gets is intact


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


def test_parallel_migrations_into_a_new_schema_all_succeed(tmp_path: Path) -> None:
    """Three ``skiplock migrate`` processes at once into a schema that does not exist yet (a
    deploy's init containers), three rounds: every one exits 0, the schema migrated once.
    Creating the schema outside the migration lock failed one of them on a duplicate key."""
    sep = "&" if "?" in PG_URL else "?"
    for _ in range(3):
        schema = f"t_new_{uuid.uuid4().hex[:10]}"
        url = f"{PG_URL}{sep}schema={schema}"
        env = Cli(url, tmp_path).env()  # the repo root, then the caller's path (its src)
        try:
            procs = [
                subprocess.Popen(
                    [sys.executable, "-m", "skiplock", "migrate", "--url", url],
                    env=env,
                    cwd=tmp_path,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for _ in range(3)
            ]
            results = [(p.wait(timeout=90), *p.communicate()) for p in procs]
            assert [code for code, _, _ in results] == [0, 0, 0], results
            applied = sorted(out for _, out, _ in results)
            assert applied[1:] == ["schema already up to date\n"] * 2, applied
            app = skiplock.App(url)
            assert asyncio.run(_version_and_close(app)) == (LATEST_PG, LATEST_PG)
        finally:
            asyncio.run(_drop(schema))


async def _version_and_close(app: skiplock.App) -> tuple[int, int]:
    try:
        return await (await app.backend()).schema_version()
    finally:
        await app.close()


async def _drop(schema: str) -> None:
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()
