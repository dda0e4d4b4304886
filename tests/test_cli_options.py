"""``skiplock worker``'s options come from ``WorkerConfig`` (issue 10 §4): every field, its
default written once, its help from its docstring, its value checked by WorkerConfig."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click
import pytest

from skiplock import WorkerConfig
from skiplock._cli import main
from skiplock._cli.options import field_docs, flag
from skiplock._worker.supervisor import Backoff

from .helpers import APP, Cli


def worker_options() -> dict[str, click.Option]:
    command = main.commands["worker"]
    return {p.name: p for p in command.params if isinstance(p, click.Option) and p.name}


def test_every_field_is_an_option_with_the_fields_default() -> None:
    options = worker_options()
    for field in dataclasses.fields(WorkerConfig):
        assert field.name in options, f"WorkerConfig.{field.name} has no option"
        option = options[field.name]
        assert flag(field.name) in option.opts
        assert option.default == field.default, field.name
        assert option.help, f"--{field.name} has no help text"


def test_help_comes_from_the_field_docstrings() -> None:
    docs = field_docs()
    assert docs["concurrency"].startswith("Jobs running at once")
    assert worker_options()["concurrency"].help == docs["concurrency"]


@pytest.mark.parametrize(
    ("field_name", "expected"),
    [
        ("poll_interval_s", "--poll-interval"),
        ("poll_interval", "--poll-interval"),
        ("claim_batch", "--claim-batch"),
        ("lease_margin_s", "--lease-margin"),
        ("queues", "--queues"),
    ],
)
def test_flags_drop_the_unit_suffix(field_name: str, expected: str) -> None:
    assert flag(field_name) == expected


def test_a_bad_value_names_the_flag(tmp_path: Path) -> None:
    cli = Cli(f"sqlite:///{tmp_path / 'jobs.db'}", tmp_path)
    result = cli.run("worker", APP, "--completion-batch", "0")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "Error: --completion-batch: completion_batch=0: must be between 1 and" in result.stderr


@pytest.mark.slow
def test_an_option_the_cli_used_to_lack_reaches_the_worker(tmp_path: Path) -> None:
    cli = Cli(f"sqlite:///{tmp_path / 'jobs.db'}", tmp_path)
    assert cli.run("migrate", APP).returncode == 0
    result = cli.run("worker", APP, "--burst", "--name", "night-shift", "--queues", "default")
    assert result.returncode == 0, result.stderr
    assert "worker night-shift started" in result.stderr


@pytest.mark.slow
def test_an_unknown_queue_is_warned_about(tmp_path: Path) -> None:
    cli = Cli(f"sqlite:///{tmp_path / 'jobs.db'}", tmp_path)
    assert cli.run("migrate", APP).returncode == 0
    result = cli.run("worker", APP, "--burst", "--queues", "default,nosuchqueue")
    assert result.returncode == 0, result.stderr
    assert "no task of this app uses queue 'nosuchqueue'" in result.stderr
    assert "queue 'default'" not in result.stderr


def test_restart_delays_double_up_to_the_cap_and_reset() -> None:
    backoff = Backoff(first_s=1.0, cap_s=60.0)
    assert [backoff.next_delay() for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    for _ in range(2000):  # no overflow however long a child keeps dying
        assert backoff.next_delay() == 60
    backoff.reset()
    assert backoff.next_delay() == 1
