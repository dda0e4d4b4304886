"""Errors a person reads from the real CLI: one line and an exit code, never a traceback, never
a password (issue 9 items 14, 16, 17, 18), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import skiplock

from .conftest import PG_URL
from .helpers import APP, ROOT, Cli, free_port, latest, newer_schema, wait_until

pytestmark = pytest.mark.slow


def one_line_error(result: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The single ``Error: ...`` line a failed command printed (and nothing else)."""
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "CRITICAL" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def cli(db_url: str, tmp_path: Path) -> Cli:
    return Cli(db_url, tmp_path)


def test_an_unmigrated_worker_says_so_in_one_line(cli: Cli) -> None:
    error = one_line_error(cli.run("worker", APP, "--burst"))
    assert "run `skiplock migrate" in error


def test_a_newer_schema_is_refused_naming_both_versions(cli: Cli) -> None:
    assert cli.run("migrate", APP).returncode == 0
    newer_schema(cli.url)
    for command in (["migrate", APP], ["worker", APP, "--burst"], ["queue", "list", APP]):
        error = one_line_error(cli.run(*command))
        assert "version 99" in error and f"this skiplock's {latest(cli.url)}" in error, command


def test_uvloop_missing_is_one_line(cli: Cli, tmp_path: Path) -> None:
    assert cli.run("migrate", APP).returncode == 0
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "uvloop.py").write_text('raise ImportError("uvloop is not here")\n')
    env = {**cli.env(), "PYTHONPATH": f"{shadow}{os.pathsep}{ROOT}"}
    result = subprocess.run(
        [sys.executable, "-m", "skiplock", "worker", APP, "--burst", "--loop", "uvloop"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "uvloop is not installed" in one_line_error(result)


def test_a_job_id_past_64_bits_is_one_line(cli: Cli) -> None:
    assert cli.run("migrate", APP).returncode == 0
    result = cli.run("job", "show", APP, "99999999999999999999999")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "JOB_ID" in result.stderr


def test_an_unknown_log_level_is_a_usage_error(cli: Cli) -> None:
    result = cli.run("worker", APP, "--log-level", "verbose")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "'verbose' is not one of" in result.stderr


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("raise RuntimeError('no config file')\n", "RuntimeError: no config file"),
        ("def broken(:\n", "SyntaxError"),
    ],
)
def test_an_app_module_that_fails_to_import_is_one_line(
    cli: Cli, tmp_path: Path, source: str, expected: str
) -> None:
    (tmp_path / "user_tasks.py").write_text(source)
    env = {**cli.env(), "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    result = subprocess.run(
        [sys.executable, "-m", "skiplock", "worker", "user_tasks:app"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    error = one_line_error(result)
    assert "cannot import 'user_tasks'" in error and expected in error


@pytest.mark.parametrize("spec", [":app", ""])
def test_an_app_spec_without_a_module_is_one_line(cli: Cli, spec: str) -> None:
    assert "expected MODULE:ATTRIBUTE" in one_line_error(cli.run("worker", spec))


def test_passwords_never_reach_the_screen(pg_url: str, tmp_path: Path) -> None:
    """The local server trusts connections, so a password in the URL is accepted, unused."""
    with_password = pg_url.replace("://postgres@", "://postgres:hunter2@")
    assert with_password != pg_url
    assert "hunter2" not in repr(skiplock.App(with_password))
    result = Cli(with_password, tmp_path).run("worker", APP, "--burst")
    error = one_line_error(result)
    assert "postgres:***@" in error and "hunter2" not in result.stderr + result.stdout


def test_secrets_can_come_from_standard_input_not_argv(pg_url: str, tmp_path: Path) -> None:
    """A command line is readable by every user of the host (``ps``, /proc): the database URL
    and a password to hash can come from standard input instead."""
    cli = Cli(pg_url, tmp_path)
    assert cli.run("migrate", APP).returncode == 0
    with_password = pg_url.replace("://postgres@", "://postgres:hunter2@")
    listed = subprocess.run(
        [sys.executable, "-m", "skiplock", "queue", "list", "--url", "-", "--json"],
        input=with_password + "\n",
        env=cli.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["queues"] == []
    hashed = subprocess.run(
        [sys.executable, "-m", "skiplock", "hash-password", "--password-stdin"],
        input="correct horse\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert hashed.returncode == 0, hashed.stderr
    from skiplock.dashboard.auth import verify_password

    assert verify_password("correct horse", hashed.stdout.strip())


@pytest.mark.parametrize("secret", ["password=hunter2", "sslpassword=hunter2"])
def test_the_worker_start_line_masks_a_password_in_the_query(
    pg_url: str, tmp_path: Path, secret: str
) -> None:
    with_password = f"{pg_url}&{secret}"
    cli = Cli(with_password, tmp_path)
    assert cli.run("migrate", APP).returncode == 0
    result = cli.run("worker", APP, "--burst")
    assert result.returncode == 0, result.stderr
    assert "started" in result.stderr and secret.replace("hunter2", "***") in result.stderr
    assert "hunter2" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["task", "pause", APP, "record", "--for", "inf"], "--for"),
        (["job", "list", APP, "--limit", "99999999999999999999"], "--limit"),
        (["dead", "list", APP, "--limit", "99999999999999999999"], "--limit"),
        (["queue", "limit", APP, "default", "--max-depth", "99999999999999999999"], "--max-depth"),
        (["queue", "limit", APP, "default", "--max-running", "-1"], "--max-running"),
        (["queue", "limit", APP, "default", "--rate", "inf"], "--rate"),
        (["queue", "limit", APP, "default", "--aging", "0"], "--aging"),
        (["queue", "limit", APP, "default", "--aging", "2592001"], "--aging"),
        (["health", APP, "--max-silence", "nan"], "--max-silence"),
        (["health", APP, "--max-backlog-age", "inf"], "--max-backlog-age"),
        (["stats", APP, "--watch", "nan"], "--watch"),
        (["stats", APP, "--alert-backlog-age", "nan"], "--alert-backlog-age"),
        (["dashboard", APP, "--refresh", "nan"], "--refresh"),
        (["dashboard", APP, "--sample-every", "nan"], "--sample-every"),
    ],
)
def test_out_of_range_numbers_are_refused_at_the_edge(
    cli: Cli, command: list[str], option: str
) -> None:
    assert cli.run("migrate", APP).returncode == 0
    result = cli.run(*command)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert option in result.stderr


def _run_in(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in ``cwd`` (where an empty URL used to leave ``skiplock.db``)."""
    environ = {k: v for k, v in os.environ.items() if k != "SKIPLOCK_DATABASE_URL"}
    return subprocess.run(
        [sys.executable, "-m", "skiplock", *args],
        env={**environ, "PYTHONPATH": str(ROOT), **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_empty_url_is_an_error_naming_the_flag_or_the_variable(tmp_path: Path) -> None:
    """``--url "$DATABASE_URL"`` with the variable unset, or ``SKIPLOCK_DATABASE_URL=``: an
    error naming which, exit 2, and no ./skiplock.db made and migrated."""
    for url in ("", "  "):
        error = one_line_error(_run_in(tmp_path, "migrate", "--url", url))
        assert "--url is empty" in error
    error = one_line_error(_run_in(tmp_path, "migrate", APP, SKIPLOCK_DATABASE_URL=""))
    assert "SKIPLOCK_DATABASE_URL is set but empty" in error
    error = one_line_error(_run_in(tmp_path, "queue", "list", APP, SKIPLOCK_DATABASE_URL=""))
    assert "SKIPLOCK_DATABASE_URL is set but empty" in error
    with pytest.raises(skiplock.ConfigurationError, match="url is empty"):
        skiplock.App("")
    assert list(tmp_path.iterdir()) == []


def test_a_read_on_a_missing_sqlite_file_says_so_and_creates_nothing(tmp_path: Path) -> None:
    """Read-only commands, a worker and the dashboard on a path with no database: one line
    saying so; the file is not created (only ``migrate`` makes one)."""
    url = f"sqlite:///{tmp_path / 'missing.db'}"
    for command in (
        ["queue", "list", "--url", url],
        ["job", "list", "--url", url],
        ["dead", "list", "--url", url],
        ["stats", "--url", url],
        ["health", "--url", url],
    ):
        error = one_line_error(_run_in(tmp_path, *command))
        assert f"no SQLite database at {tmp_path / 'missing.db'}" in error, command
    for command in (["worker", APP, "--burst"], ["dashboard", APP, "--port", "0"]):
        error = one_line_error(_run_in(tmp_path, *command, SKIPLOCK_DATABASE_URL=url))
        assert "run `skiplock migrate` to create it" in error, command
    assert list(tmp_path.iterdir()) == []
    assert _run_in(tmp_path, "migrate", "--url", url).returncode == 0
    assert "no queues" in _run_in(tmp_path, "queue", "list", "--url", url).stdout


def _pg_with(query: str) -> str:
    return f"{PG_URL}{'&' if '?' in PG_URL else '?'}{query}"


def test_a_url_option_the_driver_refuses_fails_fast_not_retried(tmp_path: Path) -> None:
    """``?sslmode=bogus`` is a person's mistake: one line, exit 2, at once (it looped on
    "database unavailable ... retrying"), for a worker, the dashboard and a command."""
    for query in ("sslmode=bogus", "target_session_attrs=bogus"):
        url = _pg_with(query)
        option = query.split("=")[0]
        for command in (["worker", APP, "--burst"], ["dashboard", APP, "--port", "0"]):
            error = one_line_error(_run_in(tmp_path, *command, SKIPLOCK_DATABASE_URL=url))
            assert "the database URL" in error and option in error, (command, error)
        error = one_line_error(_run_in(tmp_path, "queue", "list", "--url", url))
        assert option in error


def test_an_unreachable_database_is_still_retried(tmp_path: Path) -> None:
    """Nothing listening at the address is an outage: the worker logs and retries (until
    stopped), it does not exit."""
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "skiplock", "worker", APP],
            env={**os.environ, "PYTHONPATH": str(ROOT), "SKIPLOCK_DATABASE_URL": url},
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        retries = lambda: log.read_text().count("database unavailable")  # noqa: E731
        wait_until(lambda: retries() >= 2, "the worker to retry twice", timeout=60)
        assert worker.poll() is None, log.read_text()
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_processes_are_bounded_by_the_cpus_unless_forced(tmp_path: Path) -> None:
    """Above 4 per usable CPU ``--processes`` is refused in one line, nothing started;
    ``--force-processes`` lets them start (each then stops on the missing database)."""
    bound = 4 * len(os.sched_getaffinity(0))
    env = {"SKIPLOCK_DATABASE_URL": f"sqlite:///{tmp_path / 'missing.db'}"}
    too_many = ["worker", APP, "--burst", "--processes", str(bound + 1)]
    error = one_line_error(_run_in(tmp_path, *too_many, **env))
    assert f"--processes {bound + 1}: more than 4 per CPU ({bound} for the" in error
    assert "--force-processes" in error
    forced = _run_in(tmp_path, *too_many, "--force-processes", **env)
    assert forced.returncode == 2 and "more than 4 per CPU" not in forced.stderr
    assert f"supervisor started {bound + 1} workers" in forced.stderr, forced.stderr
