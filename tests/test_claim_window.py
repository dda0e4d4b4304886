"""The claim window (prefetch sizing) as a table: observations in, depth out. Pure."""

from __future__ import annotations

import pytest

from skiplock._worker.claim_window import ClaimWindow

SHORT = 2.0**-10  # ~1 ms: exact in binary, so Little's law lands on whole numbers
CLAIM = 2.0**-9  # ~2 ms

CASES = [
    # (name, concurrency, prefetch, job durations, claim round trips, busy_for, depth)
    ("fixed", 20, 7, [], [], 0.0, 7),
    ("fixed-while-long", 20, 7, [5.0], [CLAIM], 9.0, 7),
    ("fixed-zero", 20, 0, [SHORT], [CLAIM], 0.0, 0),
    ("nothing-measured", 20, None, [], [], 0.0, 0),
    ("no-claim-measured", 20, None, [SHORT], [], 0.0, 0),
    ("no-job-measured", 20, None, [], [CLAIM], 0.0, 0),
    ("long-jobs", 20, None, [2.0], [CLAIM], 0.0, 0),
    ("a-second-is-still-short", 4, None, [1.0], [CLAIM], 0.0, 4),
    ("little's-law", 20, None, [SHORT], [CLAIM], 0.0, 80),  # 20 / 2^-10 * 2^-9 * 2
    ("floored-at-concurrency", 20, None, [2.0**-4], [CLAIM], 0.0, 20),  # law says 2
    ("capped", 20, None, [2.0**-20], [CLAIM], 0.0, 1000),  # a no-op job: 1e-5 s
    ("cap-below-concurrency", 2000, None, [SHORT], [CLAIM], 0.0, 2000),
    ("turning-long", 20, None, [SHORT], [CLAIM], 1.0, 0),
    ("not-yet-long", 20, None, [SHORT], [CLAIM], 0.999, 80),
    ("mean-falls-under-a-second", 4, None, [2.0] + [0.0] * 7, [CLAIM], 0.0, 4),  # 0.96
    ("mean-still-over-a-second", 4, None, [2.0] + [0.0] * 6, [CLAIM], 0.0, 0),  # 1.06
    ("claim-mean", 21, None, [SHORT], [CLAIM, 0.0], 0.0, 68),  # 21 / 2^-10 * 0.8 * 2^-9 * 2
]


@pytest.mark.parametrize(
    ("concurrency", "prefetch", "jobs", "claims", "busy_for", "depth"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_depth(
    concurrency: int,
    prefetch: int | None,
    jobs: list[float],
    claims: list[float],
    busy_for: float,
    depth: int,
) -> None:
    window = ClaimWindow(concurrency, prefetch)
    for seconds in jobs:
        window.job_took(seconds)
    for seconds in claims:
        window.claim_took(seconds)
    assert window.depth(busy_for) == depth


@pytest.mark.parametrize(
    ("observations", "mean"), [([], None), ([1.0], 1.0), ([1.0, 2.0], 1.1), ([1.0, 2.0, 2.0], 1.19)]
)
def test_job_durations_are_a_moving_average(observations: list[float], mean: float | None) -> None:
    window = ClaimWindow(4)
    for seconds in observations:
        window.job_took(seconds)
    assert window.mean_duration == (None if mean is None else pytest.approx(mean))
    assert window.claim_s is None


@pytest.mark.parametrize(
    ("observations", "mean"), [([], None), ([1.0], 1.0), ([1.0, 2.0], 1.2), ([1.0, 2.0, 0.0], 0.96)]
)
def test_claim_round_trips_are_a_moving_average(
    observations: list[float], mean: float | None
) -> None:
    window = ClaimWindow(4)
    for seconds in observations:
        window.claim_took(seconds)
    assert window.claim_s == (None if mean is None else pytest.approx(mean))
    assert window.mean_duration is None


@pytest.mark.parametrize(
    ("prefetch", "busy_for", "gives_back"),
    [(None, 1.0, True), (None, 30.0, True), (None, 0.999, False), (None, 0.0, False),
     (0, 30.0, False), (5, 30.0, False)],
)  # fmt: skip
def test_jobs_held_ahead_go_back_once_every_slot_runs_a_long_job(
    prefetch: int | None, busy_for: float, gives_back: bool
) -> None:
    assert ClaimWindow(4, prefetch).gives_back(busy_for) is gives_back


@pytest.mark.parametrize(
    ("concurrency", "prefetch", "jobs", "keep"),
    [
        (10, None, [], None),  # nothing measured: no bound yet
        (10, 5, [0.5], None),  # a fixed prefetch is what the person asked for
        (10, None, [0.5], 20),  # 10 slots, half a second a job: 20 start within a second
        (10, None, [0.05], 200),
        (2, None, [1e-4, 0.1], 198),  # the mean after one no-op and one 0.1 s job: 0.0101
        (10, None, [2.0**-16], 10 * 2**16),  # no-ops: no practical bound
    ],
)
def test_keep_ahead_is_what_the_slots_start_within_a_short_jobs_time(
    concurrency: int, prefetch: int | None, jobs: list[float], keep: int | None
) -> None:
    window = ClaimWindow(concurrency, prefetch)
    for seconds in jobs:
        window.job_took(seconds)
    assert window.keep_ahead() == keep
