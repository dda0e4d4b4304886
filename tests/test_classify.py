"""``classify`` is pure: a table of how an attempt ended and what happens to the job."""

from __future__ import annotations

import asyncio
import random

import pytest

from skiplock import Cancel, Retry, RetryPolicy, Snooze
from skiplock._job import Disposition
from skiplock._worker.classify import JobTimeout, UnrunnableJob, classify

POLICY = RetryPolicy(base=2.0, cap=100.0, jitter=False)


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
    policy = RetryPolicy(base=1.0, cap=10.0)
    rng = random.Random(7)
    for attempt in range(1, 12):
        ceiling = min(10.0, 2.0 ** (attempt - 1))
        delays = [policy.delay(attempt, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # full jitter spans the window
    assert RetryPolicy(base=1.0, cap=10.0, jitter=False).delay(20) == 10.0


def test_error_records_are_bounded() -> None:
    decision = classify(ValueError("x" * 10_000), attempt=1, max_attempts=3, retry=POLICY)
    assert decision.error is not None
    assert len(decision.error["message"]) <= 2000
    assert len(decision.error["traceback"]) <= 8000
