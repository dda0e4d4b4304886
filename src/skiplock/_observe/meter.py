"""A worker's own counters and histograms, in plain Python: what this process claimed, started,
finished, how long jobs ran, how long claims and outcome writes took.

Kept cheap for the hot path: a dict increment per job started and per outcome written (the
completer records a whole batch at once), a bucket increment per observation, no lock, no
import of prometheus-client. An exporter (``skiplock.prometheus``) reads these at scrape time.
Label sets are bounded: past ``MAX_SERIES`` distinct (queue, task) pairs, new ones count as
("other", "other"), so a flood of odd task names cannot grow the exposition without end.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from .._job import Completion, Disposition
from .outcomes import OUTCOMES

MAX_SERIES = 200
"""Distinct (queue, task) pairs a worker keeps apart; the rest are ("other", "other")."""

OTHER = ("other", "other")

RUN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Run durations in seconds (upper bounds; +Inf is implied)."""
ROUND_TRIP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
"""Claim round trips and completer lag, in seconds."""
BATCH_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
"""Jobs per claim."""


@dataclass(slots=True)
class Histogram:
    """Counts per bucket (not cumulative: the exporter adds them up), a sum and a count."""

    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    sum: float = 0.0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1  # le is inclusive
        self.sum += value

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, cumulative count) per bucket, +Inf last, as Prometheus exposes them."""
        out, total = [], 0
        for bound, count in zip((*self.buckets, float("inf")), self.counts, strict=True):
            total += count
            out.append(("+Inf" if bound == float("inf") else repr(bound), total))
        return out


@dataclass(slots=True)
class Series:
    """One (queue, task) pair's outcomes and run durations on this worker."""

    started: int = 0
    outcomes: dict[Disposition, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    run_s: Histogram = field(default_factory=lambda: Histogram(RUN_BUCKETS))


@dataclass(slots=True)
class HoldGauge:
    """One kind of hold of the storage's upkeep as this worker sees it (``_worker/holds.py``):
    the ``skiplock_storage_held_*`` gauges' values."""

    since: float | None = None
    """``time.monotonic()`` when this worker first saw the hold (None: not held)."""
    dead_versions: int | None = None
    """PostgreSQL: the dead row versions the hold keeps (the held segments', or those the
    vacuum could not remove); None for the WAL."""
    wal_bytes: int | None = None
    """SQLite: the ``-wal`` file's size at the last look, held or not."""

    def held_s(self, now: float) -> float:
        """How long it has been held at ``now`` (0: it is not)."""
        return 0.0 if self.since is None else max(0.0, now - self.since)


class Meter:
    """One worker's counters. Read by an exporter on another thread: each read copies."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, str], Series] = {}
        self.claim_batch = Histogram(BATCH_BUCKETS)
        self.claim_round_trip_s = Histogram(ROUND_TRIP_BUCKETS)
        self.completer_lag_s = Histogram(ROUND_TRIP_BUCKETS)
        self.reclaimed = 0
        self.holds: dict[str, HoldGauge] = {}
        """The kinds of hold of the storage's upkeep this worker watches (``HOLD_KINDS``):
        one series each, whatever holds it."""

    def hold(self, kind: str) -> HoldGauge:
        """The gauge of hold ``kind`` (made at the first call: a watcher's)."""
        return self.holds.setdefault(kind, HoldGauge())

    def _series(self, queue: str, task: str) -> Series:
        """The pair's series, created on first sight (past MAX_SERIES: the "other" one)."""
        series = self.series.get((queue, task))
        if series is None:
            key = (queue, task) if len(self.series) < MAX_SERIES else OTHER
            series = self.series.setdefault(key, Series())
        return series

    def claim(self, jobs: int, round_trip_s: float) -> None:
        """One claim that returned ``jobs`` jobs in ``round_trip_s`` seconds."""
        self.claim_batch.observe(jobs)
        self.claim_round_trip_s.observe(round_trip_s)

    def start(self, queue: str, task: str) -> None:
        (self.series.get((queue, task)) or self._series(queue, task)).started += 1

    def written(self, batch: Iterable[Completion], lag_s: float) -> None:
        """A batch of outcomes the completer wrote, its oldest having waited ``lag_s``: one
        dict lookup a job, its histogram's bucket found by bisection."""
        self.completer_lag_s.observe(lag_s)
        known, find = self.series, bisect.bisect_left
        for c in batch:
            series = known.get((c.queue, c.task)) or self._series(c.queue, c.task)
            series.outcomes[c.disposition] += 1
            if c.run_s is not None:  # Histogram.observe, inlined: this loop runs per job
                run = series.run_s
                run.counts[find(run.buckets, c.run_s)] += 1
                run.sum += c.run_s

    def reclaim(self, jobs: int) -> None:
        """Expired leases this worker's sweep returned to pending (anyone's)."""
        self.reclaimed += jobs
