"""Percentiles from log-scale histogram buckets, so a statistics reading never sorts its window.

Ranking every claim and run of the window (``row_number() OVER (... ORDER BY v)``) sorted all
of them: 7.7 s, spilled to disk, with 171,000 jobs in a five-minute window. Instead each sample
falls in bucket ``floor(ln(max(v, FLOOR_S)) / ln(1 + ERROR))``, the database counts each
bucket (with its smallest and largest value) per (queue, task, kind) in one hash aggregate
(PostgreSQL) or this module counts the streamed samples (SQLite, whose GROUP BY would sort),
and this module rolls the buckets up per queue, per task and for all, and walks them to the
nearest rank.

The error bound: a percentile is the smallest value of the bucket that holds the exact
nearest-rank value (rank ``ceil(p * n)``), so it is never above the exact value and, for values
of at least ``FLOOR_S``, less than ``ERROR`` (1 %) below it; a bucket of equal values gives the
exact value. Values below ``FLOOR_S`` (1 microsecond) share one bucket. The maximum is exact.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

ERROR = 0.01
"""The largest relative error of a percentile (the buckets' width ratio less one)."""

FLOOR_S = 1e-6
"""Values below this (seconds) share the lowest bucket."""

_LOG_BASE = math.log1p(ERROR)


def bucket_of(v: float) -> int:
    """The bucket a sample falls in (the SQL statements compute the same expression)."""
    return math.floor(math.log(max(v, FLOOR_S)) / _LOG_BASE)


Bucket = list[float]
"""[count, smallest value, largest value]."""


def _merge(into: dict[int, Bucket], bucket: int, n: float, lo: float, hi: float) -> None:
    seen = into.get(bucket)
    if seen is None:
        into[bucket] = [n, lo, hi]
    else:
        seen[0] += n
        seen[1] = min(seen[1], lo)
        seen[2] = max(seen[2], hi)


def bucket_samples(samples: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Raw (queue, task, kind, v) samples as the bucket rows ``ranks_from_buckets`` reads."""
    out: dict[tuple[str, str, str], dict[int, Bucket]] = {}
    for queue, task, kind, v in samples:
        _merge(out.setdefault((queue, task, kind), {}), bucket_of(float(v)), 1, v, v)
    return [
        (*key, b, n, lo, hi) for key, buckets in out.items() for b, (n, lo, hi) in buckets.items()
    ]


def _rank(buckets: dict[int, Bucket], percent: int) -> float:
    """The smallest value of the bucket holding rank ceil(percent / 100 * n)."""
    total = sum(n for n, _, _ in buckets.values())
    rank = max(1, -(-percent * int(total) // 100))
    seen = 0.0
    for bucket in sorted(buckets):
        seen += buckets[bucket][0]
        if seen >= rank:
            return buckets[bucket][1]
    raise AssertionError("a rank beyond the count")  # pragma: no cover


def ranks_from_buckets(rows: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """(queue, task, kind, bucket, n, lo, hi) rows as ``JobStatsRows.ranks``: (dim, key,
    kind, p50, p95, max) per queue, per task and for all (dim ``all``, key ``""``)."""
    groups: dict[tuple[str, str, str], dict[int, Bucket]] = {}
    for queue, task, kind, bucket, n, lo, hi in rows:
        for dim, key in (("queue", queue), ("task", task), ("all", "")):
            _merge(groups.setdefault((dim, key, kind), {}), int(bucket), n, float(lo), float(hi))
    return [
        (dim, key, kind, _rank(b, 50), _rank(b, 95), max(hi for _, _, hi in b.values()))
        for (dim, key, kind), b in groups.items()
    ]
