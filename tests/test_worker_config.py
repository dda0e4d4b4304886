"""WorkerConfig checks every value at the edge (issue 9): durations finite, positive where a
zero would spin, and bounded; integers bounded. The CLI builds its options from the dataclass,
so ``--poll-interval inf`` is refused with the flag named, before any worker starts."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from skiplock import WorkerConfig
from skiplock._limits import MAX_BATCH, MAX_CONCURRENCY, MAX_SECONDS
from skiplock.errors import ConfigurationError

from .helpers import APP, Cli

DURATIONS = [
    "poll_interval_s",
    "shutdown_timeout_s",
    "lease_margin_s",
    "default_lease_s",
    "maintenance_interval_s",
    "retention_finished_s",
    "retention_dead_s",
    "prune_interval_s",
    "log_summary_interval_s",
    "vacuum_interval_s",
]
POSITIVE = {"poll_interval_s", "default_lease_s", "maintenance_interval_s", "prune_interval_s"}
POSITIVE |= {"retention_finished_s", "retention_dead_s"}


@pytest.mark.parametrize("field", DURATIONS)
@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, MAX_SECONDS * 2, -1.0, "1"])
def test_a_duration_must_be_finite_and_bounded(field: str, bad: object) -> None:
    with pytest.raises(ConfigurationError, match=f"^{field}="):
        WorkerConfig(**{field: bad})  # type: ignore[arg-type]


@pytest.mark.parametrize("field", DURATIONS)
def test_zero_is_refused_only_where_it_would_spin(field: str) -> None:
    if field in POSITIVE:
        with pytest.raises(ConfigurationError, match=f"^{field}=0"):
            WorkerConfig(**{field: 0})  # type: ignore[arg-type]
    else:
        assert getattr(WorkerConfig(**{field: 0}), field) == 0  # type: ignore[arg-type]


@pytest.mark.parametrize("field", DURATIONS)
def test_the_bound_itself_is_accepted(field: str) -> None:
    assert getattr(WorkerConfig(**{field: MAX_SECONDS}), field) == MAX_SECONDS  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("concurrency", 0),
        ("concurrency", MAX_CONCURRENCY + 1),
        ("concurrency", 2.0),
        ("concurrency", True),
        ("claim_batch", 0),
        ("claim_batch", MAX_BATCH + 1),
        ("completion_batch", 0),
        ("completion_batch", 10**12),
        ("prefetch", -1),
        ("prefetch", MAX_CONCURRENCY + 1),
    ],
)
def test_integers_are_bounded(field: str, bad: object) -> None:
    with pytest.raises(ConfigurationError, match=f"^{field}="):
        WorkerConfig(**{field: bad})  # type: ignore[arg-type]


def test_integers_at_their_bounds_are_accepted() -> None:
    config = WorkerConfig(
        concurrency=MAX_CONCURRENCY, claim_batch=MAX_BATCH, completion_batch=MAX_BATCH, prefetch=0
    )
    assert config.concurrency == MAX_CONCURRENCY and config.prefetch == 0


@pytest.mark.parametrize("queues", [("",), ("a\x00b",), ("q" * 2000,)])
def test_queue_names_are_checked_like_everywhere_else(queues: tuple[str, ...]) -> None:
    with pytest.raises(ConfigurationError, match=r"^queues="):
        WorkerConfig(queues=queues)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--poll-interval", "inf"), "--poll-interval: poll_interval_s=inf: must be finite"),
        (("--shutdown-timeout", "nan"), "--shutdown-timeout: shutdown_timeout_s=nan: must be"),
        (("--concurrency", "1000000"), "--concurrency: concurrency=1000000: must be between"),
    ],
)
def test_the_cli_refuses_the_same_values_naming_the_flag(
    tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    cli = Cli(f"sqlite:///{tmp_path / 'jobs.db'}", tmp_path)
    result = cli.run("worker", APP, "--burst", *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"Error: {expected}" in result.stderr
