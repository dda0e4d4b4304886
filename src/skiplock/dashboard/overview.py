"""The Overview's reading: a row per queue with its counts, settings, rates and sparkline,
and the keys' tables. With several databases (issue 46), a row per queue *and database*:
a queue may have jobs in two, and each database has its own settings row, its own backlog
and its own workers, so a sum would hide the one that is stuck. One database: one reading,
the rows as they always were."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._job import BlockedKey, JobState, KeyLoad
from .._lanes import DEFAULT
from .._observe.stats import StatsGroup
from .._printable import printable
from .._url import mask_in
from ..errors import BackendUnavailable

if TYPE_CHECKING:
    from .._app import App
    from .sampler import Sampler

ALERT_BACKLOG_AGE_S = 300.0
"""Backlog age turns red past this, as in ``skiplock stats`` (seed 000's "a few minutes");
any dead job or reclaim in the window is red too, as there."""

KEYS_SHOWN = 10
"""The busiest keys the Overview lists (a reading's own top 10, over every database)."""


@dataclass(slots=True)
class QueueRow:
    """One queue on the Overview (of one database)."""

    name: str
    counts: dict[str, int]
    paused: bool = False
    max_depth: int | None = None
    max_running: int | None = None
    rate_per_s: float | None = None
    aging_s: float | None = None
    backlog_age_s: float | None = None
    claim_latency_p50_s: float | None = None
    claim_latency_p95_s: float | None = None
    throughput_per_min: float | None = None
    retries: int = 0
    dead_recent: int = 0
    reclaims: int = 0
    spark: list[int] = field(default_factory=list)
    database: str = DEFAULT
    """The database these counts and settings are of (shown when the App has several)."""

    def read(self, group: StatsGroup | None) -> None:
        """Take the rates of an ``app.stats()`` reading (None: nothing in its window)."""
        if group is None:
            self.throughput_per_min = 0.0
            return
        self.backlog_age_s = group.backlog_age_s
        self.claim_latency_p50_s = group.claim_latency_p50_s
        self.claim_latency_p95_s = group.claim_latency_p95_s
        self.throughput_per_min = group.throughput_per_s * 60.0
        self.retries, self.dead_recent = group.retries, group.dead
        self.reclaims = group.reclaims

    @property
    def backlog_alert(self) -> bool:
        return (self.backlog_age_s or 0.0) > ALERT_BACKLOG_AGE_S

    @property
    def depth(self) -> int:
        return self.counts["pending"] + self.counts["claimed"] + self.counts["running"]


@dataclass(slots=True)
class Overview:
    rows: list[QueueRow]
    ready: int
    """Ready jobs over every database (none and no live worker: the page's alert)."""
    keys: list[KeyLoad]
    blocked_keys: list[BlockedKey]
    down: list[str] = field(default_factory=list)
    """Several databases: each one that could not be read, a line naming it and the error
    (its queues left out, the others shown, as ``skiplock queue list`` does)."""


async def read_overview(app: App, sampler: Sampler, window_s: float) -> Overview:
    """Each database's queues, by name then database (its id order), with one
    ``app.stats()`` reading and one count a database."""
    none = {state: 0 for state in (*(s.value for s in JobState), "claimed")}
    rows: list[QueueRow] = []
    ready = 0
    keys: list[KeyLoad] = []
    blocked: list[BlockedKey] = []
    down: list[str] = []
    several = len(sampler.databases()) > 1
    for database in sampler.databases():
        try:
            infos = {q.name: q for q in await app.queues(database=database)}
            stats = await app.stats(window_s=window_s, database=database)
            counts = await app.counts_by_queue(database=database)
            names = await sampler.queue_names(database)
        except BackendUnavailable as exc:
            if not several:  # one database: its outage is the page's, as it always was
                raise
            error = mask_in(str(exc) or type(exc).__name__, app.url_of(database))
            down.append(f"database {database}: {printable(error)}")
            continue
        for name in names:
            row = QueueRow(name, counts.get(name) or dict(none), database=database)
            if (info := infos.get(name)) is not None:
                row.paused, row.max_depth = info.paused, info.max_depth
                row.max_running, row.rate_per_s = info.max_running, info.rate_per_s
                row.aging_s = info.aging_s
            row.read(stats.queue(name))
            row.spark = sampler.depths(name, database)
            rows.append(row)
        ready += stats.total.ready
        keys += stats.keys
        blocked += stats.blocked_keys
    if several:
        rows.sort(key=lambda r: r.name)  # stable: a name's rows stay in the databases' order
        keys = sorted(keys, key=lambda k: (-k.running, -k.ready, -k.pending, k.key))
        keys, blocked = keys[:KEYS_SHOWN], blocked[:KEYS_SHOWN]
    return Overview(rows, ready, keys, blocked, down)
