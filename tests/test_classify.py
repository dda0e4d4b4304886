"""``classify`` is pure: a table of how an attempt ended and what happens to the job."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from skiplock import Cancel, Retry, RetryPolicy, Snooze
from skiplock._job import Disposition
from skiplock._worker.classify import JobTimeout, UnrunnableJob, classify

POLICY = RetryPolicy(base_s=2.0, cap_s=100.0, jitter=False)


class Permanent(Exception):
    pass


@pytest.mark.parametrize(
    ("exc", "attempt", "max_attempts", "disposition", "delay", "has_error"),
    [
        (None, 1, 3, Disposition.SUCCEED, 0.0, False),
        (ValueError("x"), 1, 3, Disposition.RETRY, 2.0, True),
        (ValueError("x"), 2, 3, Disposition.RETRY, 4.0, True),
        (ValueError("x"), 3, 3, Disposition.DEAD, 0.0, True),
        (JobTimeout("slow"), 1, 3, Disposition.RETRY, 2.0, True),
        (Retry(in_s=7), 1, 3, Disposition.RETRY, 7.0, True),
        (Retry(in_s=7), 3, 3, Disposition.DEAD, 0.0, True),
        (Snooze(in_s=5), 3, 3, Disposition.SNOOZE, 5.0, False),
        (Cancel("no"), 1, 3, Disposition.CANCEL, 0.0, True),
        (UnrunnableJob("unknown task"), 1, 3, Disposition.DEAD, 0.0, True),
        (Permanent("bad input"), 1, 3, Disposition.DEAD, 0.0, True),
        (SystemExit(3), 1, 3, Disposition.RETRY, 2.0, True),
        (KeyboardInterrupt(), 1, 3, Disposition.RETRY, 2.0, True),
        (asyncio.CancelledError(), 1, 3, Disposition.RETRY, 2.0, True),
    ],
)
def test_classify_table(
    exc: BaseException | None,
    attempt: int,
    max_attempts: int,
    disposition: Disposition,
    delay: float,
    has_error: bool,
) -> None:
    decision = classify(
        exc, attempt=attempt, max_attempts=max_attempts, retry=POLICY, permanent=(Permanent,)
    )
    assert decision.disposition is disposition
    assert decision.delay_s == delay
    assert (decision.error is not None) is has_error
    if decision.error is not None:
        assert decision.error["attempt"] == attempt
        assert type(exc).__name__ in decision.error["message"]


def test_backoff_is_exponential_capped_and_fully_jittered() -> None:
    policy = RetryPolicy(base_s=1.0, cap_s=10.0)
    rng = random.Random(7)
    for attempt in range(1, 12):
        ceiling = min(10.0, 2.0 ** (attempt - 1))
        delays = [policy.delay(attempt, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # full jitter spans the window
    assert RetryPolicy(base_s=1.0, cap_s=10.0, jitter=False).delay(20) == 10.0


def test_error_records_are_bounded() -> None:
    decision = classify(ValueError("x" * 10_000), attempt=1, max_attempts=3, retry=POLICY)
    assert decision.error is not None
    assert len(decision.error["message"]) <= 2000
    assert len(decision.error["traceback"]) <= 8000


def _fail_deep(depth: int, message: str) -> None:
    if depth == 0:
        raise ValueError(message)
    _fail_deep(depth - 1, message)


def _caught(depth: int, message: str) -> BaseException:
    try:
        _fail_deep(depth, message)
    except ValueError as exc:
        return exc
    raise AssertionError("unreachable")


def test_error_records_keep_the_head_of_a_huge_message_and_the_stack() -> None:
    exc = _caught(3, "HEAD" + "x" * 100_000 + "TAIL")
    decision = classify(exc, attempt=1, max_attempts=3, retry=POLICY)
    assert decision.error is not None
    assert decision.error["message"].startswith("ValueError: HEAD")
    text = decision.error["traceback"]
    assert len(text) <= 8000
    assert "_fail_deep" in text and "raise ValueError(message)" in text
    assert "ValueError: HEAD" in text and "TAIL" not in text


def _caught_in_distinct_frames(count: int) -> BaseException:
    """A stack of ``count`` different functions (repeats would be folded by ``traceback``)."""
    source = "".join(f"def f{i}():\n    f{i + 1}()\n" for i in range(count))
    source += f"def f{count}():\n    raise ValueError('boom')\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, "<frames>", "exec"), namespace)
    try:
        namespace["f0"]()
    except ValueError as exc:
        return exc
    raise AssertionError("unreachable")


def test_error_records_keep_the_innermost_frames_of_a_deep_stack() -> None:
    exc = _caught_in_distinct_frames(300)
    decision = classify(exc, attempt=1, max_attempts=3, retry=POLICY)
    assert decision.error is not None
    text = decision.error["traceback"]
    assert len(text) <= 8000
    assert text.startswith("…\n") and text.endswith("ValueError: boom\n")
    assert "in f300" in text and "in f0\n" not in text


def test_an_exception_whose_str_raises_still_gets_a_record() -> None:
    class Hostile(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    decision = classify(Hostile(), attempt=1, max_attempts=3, retry=POLICY)
    assert decision.error is not None and "Hostile" in decision.error["message"]


@pytest.mark.parametrize("attempt", [1_024, 1_025, 5_000, 10**9])
def test_backoff_never_overflows(attempt: int) -> None:
    policy = RetryPolicy(base_s=1.0, cap_s=600.0, jitter=False)
    assert policy.delay(attempt) == 600.0
    assert 0.0 <= RetryPolicy().delay(attempt) <= 600.0
