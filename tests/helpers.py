"""What the suite's test modules share, so no test module imports another: a pinned clock,
waiting on a condition with a deadline (for events in another process, which no in-process hook
can signal), a free port, an HTTP GET, an in-process worker, and the harness that drives the
real CLI in subprocesses (``Cli`` and its fixtures). ``tests/test_suite_layout.py`` keeps it so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import asyncpg
import pytest

import skiplock
from skiplock import Worker
from skiplock._backends.postgres import statements as postgres_sql
from skiplock._backends.postgres.url import parse_postgres_url
from skiplock._backends.sqlite import migrate as sqlite_sql

T = TypeVar("T")

PG_URL = os.environ.get("SKIPLOCK_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
"""The test server (``conftest.pg_url`` makes a schema on it for each test)."""


def server_url(url: str) -> str:
    """What asyncpg connects with to ``url``'s server and database: a skiplock URL less
    skiplock's own options (``schema``, ``pooler``...). A test on PostgreSQL 18 (the
    ``postgres18`` parameter, tests/clusters.py) gets its sessions from its URL this way,
    never from ``PG_URL``, which names the shared server."""
    return parse_postgres_url(url).dsn


class FakeClock:
    """A pinned clock the backends read instead of the database's now()."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def wait_until(condition: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    """Poll ``condition`` until it is truthy and return it; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return value


async def await_until_async(
    condition: Callable[[], Awaitable[object]], what: str, timeout: float = 30.0
) -> None:
    """``await_until`` for a condition that must itself be awaited (a query): looked at every
    50 ms until it answers truthy; fails naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def await_until(condition: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    """``wait_until`` for async tests: the event loop keeps running between looks."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
    return value


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(port: int, path: str) -> tuple[int, str]:
    """GET ``path`` on 127.0.0.1:``port``: the status and the body, an error status included."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@contextlib.asynccontextmanager
async def running(app: skiplock.App, **options: object) -> AsyncIterator[Worker]:
    """An in-process worker on ``app`` for the block, stopped (and awaited) on the way out."""
    worker = Worker(app, poll_interval_s=0.05, **options)  # type: ignore[arg-type]
    run = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.request_stop()
        await asyncio.wait_for(run, timeout=30)


async def turn_of(backend: Any, segment: int, within_s: float = 60.0) -> Any:
    """PostgreSQL's rotation turn that retires live generation ``segment`` (a ``Rotation``):
    with no size asked for, every turn makes a new generation, so ``segment`` is retired on
    the second turn after it stopped taking new jobs (the one before the newest is kept), on
    a quiet server. A turn can also do less and leave it to the next (a lock past its short
    timeout: autovacuum on a generation, a busy machine), so turns are taken until one retires
    it or ``within_s`` passes; the turns seen are in the error."""
    seen: list[Any] = []
    deadline = asyncio.get_running_loop().time() + within_s
    while not seen or asyncio.get_running_loop().time() < deadline:
        done = await backend.rotate_live(0)
        if done is not None and done.segment == segment and (done.detached or done.held):
            return done
        seen.append(done)
    raise AssertionError(f"generation {segment} was never retired; turns: {seen[-8:]}")


# --- schema versions -------------------------------------------------------------------------

LATEST = sqlite_sql.MIGRATIONS[-1][0]
"""The schema version this skiplock migrates a SQLite file to."""

LATEST_PG = postgres_sql.MIGRATIONS[-1][0]
"""The schema version this skiplock migrates a PostgreSQL schema to (two more than SQLite's:
migration 11 partitions PostgreSQL's job table, which SQLite keeps whole, and 12 splits its live
partition into segments)."""


def migrations_from(url: str, version: int) -> list[int]:
    """Every migration number from ``version`` to the newest that ``url``'s database lists,
    with no gap: what ``migrate`` must apply to a database at ``version - 1`` (a number
    missing from the list fails the tests that compare with this)."""
    listed = sqlite_sql.MIGRATIONS if url.startswith("sqlite") else postgres_sql.MIGRATIONS
    return list(range(version, max(number for number, _, _ in listed) + 1))


async def pg_admin(statement: str, url: str = PG_URL) -> None:
    """Run one statement on the test server's database (``PG_URL``), or on ``url``'s, in a
    session of its own."""
    conn = await asyncpg.connect(server_url(url))
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def own_pg_database(schema: str) -> AsyncIterator[str]:
    """A database of the test's own on the test server, its URL naming ``schema``: who holds
    a database's MVCC horizon or a lock depends on every session in it, and the suite's
    other tests (xdist workers) have theirs in the shared one. Dropped, with whatever
    session is still in it, on the way out."""
    name = f"skiplock_{schema}_{os.urandom(5).hex()}"
    await pg_admin(f'CREATE DATABASE "{name}"')
    try:
        url = urlsplit(PG_URL)._replace(path=f"/{name}", query="").geturl()
        yield f"{url}?schema={schema}"
    finally:
        await pg_admin(f'DROP DATABASE "{name}" WITH (FORCE)')


def latest(url: str) -> int:
    """The schema version this skiplock migrates ``url``'s database to."""
    return LATEST if url.startswith("sqlite") else LATEST_PG


async def pg_schema_at(url: str, version: int) -> None:
    """Make ``url``'s schema what a skiplock of migration ``version`` left: its migrations
    applied and recorded, none after (a real older schema, to upgrade from)."""
    schema = parse_qs(urlsplit(url).query)["schema"][0]
    conn = await asyncpg.connect(server_url(url))
    try:
        async with conn.transaction():
            await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            await conn.execute(postgres_sql.Statements.for_schema(schema).MIGRATIONS_TABLE)
            for number, name, body in postgres_sql.MIGRATIONS[:version]:
                await conn.execute(body.replace("{s}", f'"{schema}"'))
                await conn.execute(
                    f'INSERT INTO "{schema}".skiplock_migrations (version, name) VALUES ($1, $2)',
                    number,
                    name,
                )
    finally:
        await conn.close()


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
        conn = await asyncpg.connect(server_url(url))
        try:
            await conn.execute(
                f'INSERT INTO "{schema}".skiplock_migrations (version, name) VALUES ($1, $2)',
                version,
                "from the future",
            )
        finally:
            await conn.close()

    asyncio.run(insert())


# --- the real CLI in subprocesses ------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
APP = "tests.apps.cli_app:app"


def sqlite_writable(path: str | Path) -> bool:
    """True if SQLite's write lock on the file at ``path`` is free now (a write transaction
    of ours that does not wait, rolled back)."""
    probe = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:  # another connection holds the write lock
        return False
    finally:
        probe.close()


class Cli:
    """Starts ``python -m skiplock ...`` with the test's database and execution log."""

    def __init__(self, url: str, tmp_path: Path, app: str = APP) -> None:
        self.url = url
        self.app = app
        self.log = tmp_path / "executions.log"
        self.tmp = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SKIPLOCK_DATABASE_URL": self.url,
            "SKIPLOCK_TEST_LOG": str(self.log),
            # the repo root first (the test apps), then the caller's path: a worktree run
            # with PYTHONPATH=its src must start workers on that src, not the installed one
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "skiplock", *args],
            env=self.env(),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        """``skiplock worker APP *args`` as a user starts it: every option not in ``args`` at
        its default (a poll interval of 0.1 s here once hid a worker that idled a whole
        default poll interval with a backlog)."""
        with open(self.tmp / f"worker-{len(self.procs)}.out", "wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "skiplock",
                    "worker",
                    self.app,
                    *args,
                ],
                env=self.env(),
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # so stop_all can end a supervisor's children too
            )
        self.procs.append(proc)
        return proc

    def output(self, index: int = 0) -> str:
        return (self.tmp / f"worker-{index}.out").read_text()

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def wait_for_line(self, line: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while line not in self.lines():
            assert time.monotonic() < deadline, f"never saw {line!r}"
            time.sleep(0.05)

    def wait_for_output(self, index: int, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output(index):
            assert time.monotonic() < deadline, f"worker {index} never said {text!r}"
            time.sleep(0.05)

    def freeze(self, proc: subprocess.Popen[Any], tries: int = 200) -> None:
        """SIGSTOP ``proc`` at a moment it holds no SQLite write lock.

        A stop that lands inside one of the worker's short write transactions (a heartbeat, a
        maintenance pass) would keep SQLite's lock for as long as the process stays stopped,
        and every other writer would fail with "database is locked" (CI saw it once). On
        SQLite the stopped process is tested with a write transaction of ours that does not
        wait; if the lock is taken, the process resumes for a moment and is stopped again.
        PostgreSQL's row locks block no one else's new rows, so a stop there is at once."""
        for _ in range(tries):
            os.kill(proc.pid, signal.SIGSTOP)
            if not self.url.startswith("sqlite"):
                return
            if sqlite_writable(urlsplit(self.url).path):
                return
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.002)  # let it finish the transaction it was in
        raise AssertionError(f"process {proc.pid} held SQLite's write lock at {tries} stops")

    def stop_all(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def cli_fixtures(module: ModuleType, spec: str = APP) -> tuple[Any, Any]:
    """The ``cli`` and ``app`` fixtures of a test module whose worker processes run ``spec``
    (``module``'s MODULE:ATTRIBUTE), e.g. ``cli, app = cli_fixtures(crash_app, CRASH_SPEC)``.
    A factory, not conftest fixtures: ``app`` here is ``module.app`` on the test's database,
    migrated, and shadows the conftest ``app`` only in the modules that ask for it. It is
    migrated in this process (what ``skiplock migrate`` runs, which test_cli tests as a
    command) and closed again, so nothing of it is open when the test starts, as when a
    ``skiplock migrate`` process did it: a process costs the slow tier ~1 s of CPU, and
    about 160 tests ask for this fixture."""

    @pytest.fixture(name="cli")
    def cli(db_url: str, tmp_path: Path) -> Iterator[Cli]:
        runner = Cli(db_url, tmp_path, spec)
        yield runner
        runner.stop_all()

    @pytest.fixture(name="app")
    async def app(cli: Cli) -> AsyncIterator[skiplock.App]:
        module.app.url = cli.url
        await module.app.migrate()
        await module.app.close()
        yield module.app
        await module.app.close()

    return cli, app


def ok(result: object) -> str:
    """The stdout of a CLI run that must have exited 0 (its output in the failure if not)."""
    assert result.returncode == 0, (result.stdout, result.stderr)  # type: ignore[attr-defined]
    return str(result.stdout)  # type: ignore[attr-defined]


async def run(cli: Cli, *args: str) -> object:
    """``cli.run`` off the event loop, so an in-process worker or watcher keeps running."""
    return await asyncio.to_thread(cli.run, *args)


# --- the documented --json schema ------------------------------------------------------------

CLI_DOC = ROOT / "docs" / "operations" / "cli.md"


def documented(heading: str) -> set[str]:
    """The keys in the table under docs/operations/cli.md's ``### `heading`...`` section."""
    text = CLI_DOC.read_text()
    start = text.index(f"### {heading}")
    end = text.find("\n### ", start + 1)
    section = text[start : end if end > 0 else None]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE))


def keys(value: dict[str, Any], prefix: str = "") -> set[str]:
    """Top-level keys, and ``name[].key`` for the keys of a list of objects; a list of jobs
    is checked against the job table separately, so only its name counts here."""
    found = set()
    for key, item in value.items():
        found.add(prefix + key)
        if key != "jobs" and isinstance(item, list) and item and isinstance(item[0], dict):
            for element in item:
                found |= keys(element, f"{prefix}{key}[].")
    return found


def parsed(result: object, code: int = 0) -> dict[str, Any]:
    """The one JSON object a ``--json`` CLI run printed on its one line, exit ``code``."""
    assert result.returncode == code, (result.stdout, result.stderr)  # type: ignore[attr-defined]
    lines = result.stdout.splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1, lines  # one object on one line
    value = json.loads(lines[0])
    assert isinstance(value, dict)
    return value


SQLITE_UNDO_KEYS = [
    "DROP TABLE skiplock_job_logs",  # migration 30 (job logs, worker children; 29: nothing)
    "ALTER TABLE skiplock_workers DROP COLUMN children",
    "DROP INDEX skiplock_jobs_pending_idx",  # migration 28 (lanes; 27 changed nothing)
    "DROP INDEX skiplock_jobs_queue_pending_idx",
    "DROP INDEX skiplock_jobs_keyed_walk_idx",
    "DROP INDEX skiplock_jobs_lease_idx",
    "ALTER TABLE skiplock_jobs_live DROP COLUMN lane",
    "CREATE INDEX skiplock_jobs_pending_idx ON skiplock_jobs_live"
    " ((concurrency_key IS NOT NULL), priority DESC, run_at, id) WHERE state = 'pending'",
    "CREATE INDEX skiplock_jobs_queue_pending_idx ON skiplock_jobs_live"
    " (queue, (concurrency_key IS NOT NULL), priority DESC, run_at, id) WHERE state = 'pending'",
    "CREATE INDEX skiplock_jobs_keyed_walk_idx ON skiplock_jobs_live"
    " (queue, concurrency_key, priority DESC, run_at, id)"
    " WHERE state = 'pending' AND concurrency_key IS NOT NULL",
    "CREATE INDEX skiplock_jobs_lease_idx ON skiplock_jobs_live (lease_expires_at)"
    " WHERE state = 'running'",
    "ALTER TABLE skiplock_batches DROP COLUMN pruned_members",  # migration 26
    "DROP TRIGGER skiplock_key_turns_end_state",  # migration 25 (key turns end when idle)
    "DROP TRIGGER skiplock_key_turns_end_delete",
    "DROP INDEX skiplock_jobs_unique_idx",  # migration 24 (parked jobs keep their keys)
    "ALTER TABLE skiplock_jobs_live DROP COLUMN parked",
    "CREATE UNIQUE INDEX skiplock_jobs_unique_idx ON skiplock_jobs_live (unique_key, unique_scope)"
    " WHERE unique_key IS NOT NULL"
    " AND (state IN ('pending', 'running') OR (state = 'succeeded' AND unique_succeeded))",
    "DROP INDEX skiplock_jobs_parked_ordered_idx",  # migration 22 (key turns)
    "DROP TABLE skiplock_key_turns",
    "ALTER TABLE skiplock_workers DROP COLUMN gone_after_s",  # migration 20 (worker liveness)
    "ALTER TABLE skiplock_workers DROP COLUMN process",
    "ALTER TABLE skiplock_workers DROP COLUMN restarts",
    "ALTER TABLE skiplock_workers DROP COLUMN restarts_in_a_row",
    "ALTER TABLE skiplock_waits DROP COLUMN signal_seq",  # migration 17 (workflow sequences;
    "ALTER TABLE skiplock_batches DROP COLUMN aborted_at",  # its table copies run again)
    "DROP INDEX skiplock_jobs_unique_idx",  # migration 18 (unique scopes)
    "ALTER TABLE skiplock_jobs_live DROP COLUMN unique_scope",
    "CREATE UNIQUE INDEX skiplock_jobs_unique_idx ON skiplock_jobs_live (unique_key)"
    " WHERE unique_key IS NOT NULL"
    " AND (state IN ('pending', 'running') OR (state = 'succeeded' AND unique_succeeded))",
    "ALTER TABLE skiplock_jobs_live DROP COLUMN key_weight",  # migration 15 (key weights)
    "ALTER TABLE skiplock_queues DROP COLUMN aging_s",  # migration 14 (priority aging)
    "ALTER TABLE skiplock_jobs_live DROP COLUMN unique_until",  # 13 (unique windows)
    "DROP INDEX skiplock_jobs_keyed_walk_idx",
    "DROP INDEX skiplock_jobs_keyed_running_idx",
    "DROP INDEX skiplock_jobs_keyed_head_idx",
    "DROP INDEX skiplock_jobs_dead_blocking_idx",
    "DROP INDEX skiplock_jobs_pending_idx",
    "DROP INDEX skiplock_jobs_queue_pending_idx",
    "ALTER TABLE skiplock_jobs_live DROP COLUMN concurrency_key",
    "ALTER TABLE skiplock_jobs_live DROP COLUMN key_limit",
    "ALTER TABLE skiplock_jobs_live DROP COLUMN key_order",
    "CREATE INDEX skiplock_jobs_pending_idx ON skiplock_jobs_live (priority DESC, run_at, id)"
    " WHERE state = 'pending'",
    "CREATE INDEX skiplock_jobs_queue_pending_idx"
    " ON skiplock_jobs_live (queue, priority DESC, run_at, id) WHERE state = 'pending'",
    "DELETE FROM skiplock_migrations WHERE version >= 12",
]
"""SQLite's migrations from 12 on (concurrency keys, unique windows, priority aging, weights,
workflow sequences, unique scopes, worker liveness, parked jobs' keys, batches' pruned
members, lanes; 19's id counters are written again as they are) undone on a migrated file, for the
tests that rebuild an earlier version's shape; the view is left to the caller (they drop it
first)."""


class LoopHarness:
    """One event loop and one migrated app for every example of a Hypothesis test (pytest's
    fixtures are set up once per test, not per example): each example's work runs through
    ``run``. With a ``clock``, the app's database time is that FakeClock's."""

    def __init__(self, url: str, clock: FakeClock | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.clock = clock
        self.app = skiplock.App(url, clock=clock)
        self.run(self.app.migrate())

    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.app.close())
        self.loop.close()
