"""The health numbers as typed records: ``Stats`` (per queue, per task, and for all) and
``WorkerInfo`` (one live worker), built from the rows a backend's statistics reading returns.

The backend counts per (queue, task) and buckets percentiles per queue, per task and overall
(``_backends/percentiles.py``, under 1 % below the exact nearest rank); this module only adds
the counts up and turns them into rates, so both backends give the same numbers from the same
rows. Field names carry their units (``_s``, ``_per_min``) and are the ``--json`` keys of
``skiplock stats`` as they stand.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .._backends.job_rows import blocked_key, key_load
from .._backends.params import JobStatsRows
from .._job import BlockedKey, KeyLoad, StorageHold
from .._job import WorkerInfo as WorkerInfo  # re-exported: it lives with the records now

TOTAL = ""
"""The name of the group that counts every queue and task."""


@dataclass(frozen=True, slots=True)
class StatsGroup:
    """The health numbers of one queue, one task, or of all jobs (``name`` ``""``).

    Depths are now; every other count is over the window ``(at - window_s, at]``.
    """

    name: str
    pending: int
    """Pending jobs: ``ready`` + ``scheduled``."""
    ready: int
    """Pending jobs whose run_at has come: waiting only for a worker."""
    scheduled: int
    """Pending jobs whose run_at is still ahead (scheduled, or backing off before a retry)."""
    retrying: int
    """Pending jobs that already used an attempt (awaiting a retry, or reclaimed)."""
    claimed: int
    """Claimed ahead by a worker, not started yet."""
    running: int
    waiting: int
    """Jobs in ``waiting``: a workflow's, waiting for their parents or parked on a signal. A
    count that grows while nothing runs is a workflow stuck on a parent (``on_parent_failure=
    "wait"``) or a signal nobody sends."""
    backlog_age_s: float
    """Now minus the oldest ready job's run_at (0 when none is ready): a job scheduled for
    tomorrow is not old. Alert when it passes a few minutes."""
    claim_latency_p50_s: float | None
    """From ready (run_at, or enqueue if later) to claimed, over the window's claims (each
    job's last claim); None when there was none. p95 and max likewise."""
    claim_latency_p95_s: float | None
    claim_latency_max_s: float | None
    attempts_1: int
    """Jobs finished in the window after 1 attempt; 2, 3 and 4 or more likewise. A growing
    tail means a dependency is failing, before the dead count moves."""
    attempts_2: int
    attempts_3: int
    attempts_4_plus: int
    completed: int
    """Jobs that succeeded in the window."""
    failed: int
    """Failed attempts of jobs finished in the window: ``retries`` + ``dead``."""
    retries: int
    """Attempts before the last of jobs finished in the window (each was retried or
    reclaimed)."""
    cancelled: int
    dead: int
    """Jobs that reached ``dead`` in the window. Alert on any."""
    dead_rate_per_min: float
    reclaims: int
    """Jobs whose lease expired (their worker died or stalled) and were reclaimed in the
    window. Alert on a rate above zero."""
    reclaim_rate_per_min: float
    run_duration_p50_s: float | None
    """How long the last attempt of jobs finished in the window ran (worker's clock)."""
    run_duration_p95_s: float | None
    throughput_per_s: float
    """Jobs finished in the window (any outcome) per second."""

    def as_dict(self) -> dict[str, Any]:
        """Snake_case keys with units, JSON-ready (``skiplock stats --json``)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class Stats:
    """One reading of the health numbers, taken at ``at`` by the database clock."""

    at: datetime
    window_s: float
    total: StatsGroup
    queues: tuple[StatsGroup, ...]
    """One group per queue with live jobs or activity in the window, by name."""
    tasks: tuple[StatsGroup, ...]
    """One group per task name likewise."""
    keys: tuple[KeyLoad, ...] = ()
    """The busiest concurrency keys now (most running, then most ready; at most 10), of the
    reading's queue and task."""
    blocked_keys: tuple[BlockedKey, ...] = ()
    """Ordered keys a dead job holds (at most 10, the oldest dead job first): each waits for a
    person to retry or discard that job."""
    storage: tuple[StorageHold, ...] = ()
    """What holds the storage's upkeep back now, one entry a kind (``lock``, ``horizon`` on
    PostgreSQL; ``wal`` on SQLite), and who: empty when nothing does
    (docs/operations/storage.md, "When the upkeep is held back")."""
    database: str = "default"
    """The database this reading is of (an App with ``databases=`` reads each)."""

    def queue(self, name: str) -> StatsGroup | None:
        return next((g for g in self.queues if g.name == name), None)

    def task(self, name: str) -> StatsGroup | None:
        return next((g for g in self.tasks if g.name == name), None)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``at`` as an ISO 8601 string, every group by its ``as_dict``."""
        return {
            "at": self.at.isoformat(),
            "window_s": self.window_s,
            "total": self.total.as_dict(),
            "queues": [g.as_dict() for g in self.queues],
            "tasks": [g.as_dict() for g in self.tasks],
            "keys": [dataclasses.asdict(k) for k in self.keys],
            "blocked_keys": [dataclasses.asdict(k) for k in self.blocked_keys],
            "storage": [dataclasses.asdict(h) for h in self.storage],
            "database": self.database,
        }


# -- building a reading -------------------------------------------------------------------------

_LIVE = ("ready", "scheduled", "retrying", "claimed", "running", "waiting")
_FINISHED = (
    "succeeded",
    "cancelled",
    "dead",
    "attempts_1",
    "attempts_2",
    "attempts_3",
    "attempts_4_plus",
    "retries",
)


def _counts() -> dict[str, Any]:
    return dict.fromkeys((*_LIVE, *_FINISHED, "reclaims"), 0) | {"oldest_ready": None}


def _add(into: dict[str, Any], names: Iterable[str], values: Iterable[Any]) -> None:
    for name, value in zip(names, values, strict=True):
        into[name] += int(value or 0)


def _tally(rows: JobStatsRows) -> dict[tuple[str, str], dict[str, Any]]:
    """Counts per group: {("queue", name) | ("task", name) | ("all", ""): counts}."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}

    def each(queue: str, task: str) -> list[dict[str, Any]]:
        keys = [("queue", queue), ("task", task), ("all", TOTAL)]
        return [groups.setdefault(k, _counts()) for k in keys]

    for queue, task, *live, oldest in rows.live:
        for counts in each(queue, task):
            _add(counts, _LIVE, live)
            if oldest is not None:
                known = counts["oldest_ready"]
                counts["oldest_ready"] = oldest if known is None else min(known, oldest)
    for queue, task, *finished in rows.finished:
        for counts in each(queue, task):
            _add(counts, _FINISHED, finished)
    for queue, task, reclaims in rows.reclaims:
        for counts in each(queue, task):
            counts["reclaims"] += int(reclaims)
    groups.setdefault(("all", TOTAL), _counts())
    return groups


def build_stats(rows: JobStatsRows, window_s: float, storage: Iterable[StorageHold] = ()) -> Stats:
    """The reading's public record from a backend's rows (and what holds its storage's
    upkeep back, read beside them)."""
    tallies = _tally(rows)
    ranks = {(dim, key, kind): (p50, p95, top) for dim, key, kind, p50, p95, top in rows.ranks}
    now_s = rows.now.timestamp()

    def group(dim: str, name: str) -> StatsGroup:
        return _group(name, tallies[(dim, name)], ranks, dim, now_s, window_s)

    def names(dim: str) -> list[str]:
        return sorted(key for d, key in tallies if d == dim)

    return Stats(
        at=rows.now,
        window_s=window_s,
        total=group("all", TOTAL),
        queues=tuple(group("queue", n) for n in names("queue")),
        tasks=tuple(group("task", n) for n in names("task")),
        keys=tuple(key_load(row) for row in rows.keys),
        blocked_keys=tuple(blocked_key(row) for row in rows.blocked),
        storage=tuple(storage),
    )


def _group(
    name: str,
    c: Mapping[str, Any],
    ranks: Mapping[tuple[str, str, str], tuple[float | None, float | None, float | None]],
    dim: str,
    now_s: float,
    window_s: float,
) -> StatsGroup:
    claim = ranks.get((dim, name, "claim"), (None, None, None))
    run = ranks.get((dim, name, "run"), (None, None, None))
    per_min = 60.0 / window_s
    oldest = c["oldest_ready"]
    finished = c["succeeded"] + c["cancelled"] + c["dead"]
    return StatsGroup(
        name=name,
        pending=c["ready"] + c["scheduled"],
        ready=c["ready"],
        scheduled=c["scheduled"],
        retrying=c["retrying"],
        claimed=c["claimed"],
        running=c["running"],
        waiting=c["waiting"],
        backlog_age_s=0.0 if oldest is None else max(0.0, now_s - float(oldest)),
        claim_latency_p50_s=_seconds(claim[0]),
        claim_latency_p95_s=_seconds(claim[1]),
        claim_latency_max_s=_seconds(claim[2]),
        attempts_1=c["attempts_1"],
        attempts_2=c["attempts_2"],
        attempts_3=c["attempts_3"],
        attempts_4_plus=c["attempts_4_plus"],
        completed=c["succeeded"],
        failed=c["retries"] + c["dead"],
        retries=c["retries"],
        cancelled=c["cancelled"],
        dead=c["dead"],
        dead_rate_per_min=c["dead"] * per_min,
        reclaims=c["reclaims"],
        reclaim_rate_per_min=c["reclaims"] * per_min,
        run_duration_p50_s=_seconds(run[0]),
        run_duration_p95_s=_seconds(run[1]),
        throughput_per_s=finished / window_s,
    )


def _seconds(value: float | None) -> float | None:
    """A duration from the database, never negative (clock steps), None when unmeasured."""
    if value is None or not math.isfinite(float(value)):
        return None
    return max(0.0, float(value))
