"""Errors a person reads from the real CLI: one line and an exit code, never a traceback, never
a password (issue 9 items 14, 16, 17, 18), on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import skiplock

from .test_cli import APP, ROOT, Cli
from .test_schema_guard import LATEST, newer_schema

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
        assert "version 99" in error and f"this skiplock's {LATEST}" in error, command


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
