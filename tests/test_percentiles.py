"""The histogram percentiles of a statistics reading against the exact nearest rank: never
above it, under 1 % below it, exact for equal values, the maximum exact."""

from __future__ import annotations

import math
import random

from skiplock._backends.percentiles import ERROR, bucket_samples, ranks_from_buckets


def exact(values: list[float], percent: int) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent * len(ordered) / 100)) - 1]


def test_percentiles_stay_within_the_error_bound_of_the_nearest_rank() -> None:
    rng = random.Random(24)
    for _ in range(200):
        values = [rng.lognormvariate(-3, 2) for _ in range(rng.randint(1, 400))]
        samples = [("q", "t", "run", v) for v in values]
        ((dim, key, kind, p50, p95, top),) = [
            r for r in ranks_from_buckets(bucket_samples(samples)) if r[0] == "all"
        ]
        assert (dim, key, kind, top) == ("all", "", "run", max(values))
        for percent, got in ((50, p50), (95, p95)):
            want = exact(values, percent)
            assert want * (1 - ERROR) < got <= want, (percent, got, want)


def test_equal_values_and_rollups_are_exact() -> None:
    samples = [("a", "x", "claim", 2.0)] * 3 + [("b", "x", "claim", 5.0)]
    ranks = {r[:3]: r[3:] for r in ranks_from_buckets(bucket_samples(samples))}
    assert ranks[("queue", "a", "claim")] == (2.0, 2.0, 2.0)
    assert ranks[("task", "x", "claim")] == (2.0, 5.0, 5.0)
    assert ranks[("all", "", "claim")] == (2.0, 5.0, 5.0)
