"""Prometheus metrics for skiplock (``pip install 'skiplock[prometheus]'``).

Two kinds of series, every one listed in docs/metrics.md:

- **worker-local** counters and histograms (``skiplock_jobs_total``, ``skiplock_job_run_seconds``,
  claim batch size and round trip, completer lag), read at scrape time from a worker's
  ``Meter``: what this process did since it started;
- **database-derived** gauges (depth, backlog age, claim latency, attempts, reclaims, dead
  jobs... per queue and per task), from a cached ``app.stats()`` reading that one process
  computes every few seconds (a worker: the registry's leader, see ``_observe/gauges.py``;
  an ASGI mount: at most once per ``refresh_s`` per process).

``skiplock worker --metrics-port 9108`` serves ``/metrics``. To serve them from your own ASGI
app instead (FastAPI, Starlette, ...)::

    from skiplock.prometheus import metrics_app
    api.mount("/metrics", metrics_app(app))            # DB gauges, refreshed lazily
    api.mount("/metrics", metrics_app(app, worker=w))  # plus an in-process worker's counters

Labels are bounded: at most ``MAX_SERIES`` queues, tasks and (queue, task) pairs each.
No argument, result or error text ever becomes a label. An App with several databases reads
the gauges of each, every series labelled ``database`` (one database: no such label, so a
one-database App's PromQL never changes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping, Sequence
from typing import Any, Protocol

try:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.registry import Collector, CollectorRegistry
except ImportError as exc:  # pragma: no cover - the extra is missing
    from .errors import ConfigurationError

    raise ConfigurationError(
        "Prometheus metrics need prometheus-client: pip install 'skiplock[prometheus]'"
    ) from exc

from ._observe.gauges import (
    DEFAULT_REFRESH_S,
    DEFAULT_WINDOW_S,
    GaugeCache,
    HealthReads,
    live_workers,
    read_stats,
    read_workers,
)
from ._observe.meter import MAX_SERIES, Histogram, Meter
from ._observe.outcomes import FINISHED, OUTCOMES
from ._observe.stats import Stats, StatsGroup

__all__ = ["CONTENT_TYPE", "PrometheusExporter", "SkiplockCollector", "metrics_app", "render"]

CONTENT_TYPE: str = CONTENT_TYPE_LATEST
"""The exposition's content type."""

QUEUE_STATES = ("ready", "scheduled", "retrying", "claimed", "running", "waiting")


class PrometheusExporter:
    """The ``_observe.plugins.MetricsExporter`` a worker's ``--metrics-port`` serves."""

    content_type: str = CONTENT_TYPE_LATEST

    def render(self, meter: Meter | None, gauges: GaugeCache) -> bytes:
        return render(SkiplockCollector(meter, gauges))


class SkiplockCollector(Collector):
    """Collects a worker's ``Meter`` (if any) and a ``GaugeCache``'s reading (if it leads)."""

    def __init__(self, meter: Meter | None, cache: GaugeCache) -> None:
        self.meter = meter
        self.cache = cache

    def collect(self) -> Iterator[Metric]:
        leader = _gauge(
            "skiplock_metrics_leader",
            "1 on the process that reads the database gauges (others export none).",
        )
        leader.add_metric([], 1.0 if self.cache.leader else 0.0)
        yield leader
        if self.meter is not None:
            yield from worker_metrics(self.meter)
        if self.cache.readings:
            yield from database_metrics(self.cache)


def _gauge(name: str, doc: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


def worker_metrics(meter: Meter) -> Iterator[Metric]:
    """This process's own counters and histograms."""
    started = CounterMetricFamily(
        "skiplock_jobs_started", "Jobs this worker started.", labels=["queue", "task"]
    )
    series = list(meter.series.items())
    for (queue, task), one in series:
        started.add_metric([queue, task], one.started)
    yield started
    finished = CounterMetricFamily(
        "skiplock_jobs",
        "Attempts this worker finished, by outcome (succeeded, retried, snoozed, released, "
        "cancelled, dead).",
        labels=["queue", "task", "outcome"],
    )
    for (queue, task), one in series:
        for disposition, n in list(one.outcomes.items()):
            if n:
                finished.add_metric([queue, task, OUTCOMES[disposition].label], n)
    yield finished
    run = HistogramMetricFamily(
        "skiplock_job_run_seconds",
        "How long attempts ran on this worker.",
        labels=["queue", "task"],
    )
    for (queue, task), one in series:
        if one.run_s.sum or any(one.run_s.counts):
            run.add_metric([queue, task], one.run_s.cumulative(), one.run_s.sum)
    yield run
    yield _histogram("skiplock_claim_batch_size", "Jobs per claim.", meter.claim_batch)
    yield _histogram(
        "skiplock_claim_round_trip_seconds",
        "Claim statement round trips.",
        meter.claim_round_trip_s,
    )
    yield _histogram(
        "skiplock_completer_lag_seconds",
        "How long the oldest outcome of each written batch waited to be written.",
        meter.completer_lag_s,
    )
    yield CounterMetricFamily(
        "skiplock_reclaims",
        "Expired leases this worker's sweep returned to pending (any worker's).",
        value=meter.reclaimed,
    )
    yield from _holds(meter)


def _holds(meter: Meter) -> Iterator[Metric]:
    """The storage's upkeep held back, as this worker sees it: one series a kind it watches
    (``lock`` and ``horizon`` on PostgreSQL, ``wal`` on SQLite), whoever holds it (the holder
    is in the log line and ``skiplock stats``, never a label)."""
    holds = list(meter.holds.items())
    now = time.monotonic()
    held = _gauge(
        "skiplock_storage_held_seconds",
        "How long this worker has seen the storage's upkeep held back, by hold: lock (the live "
        "segments' rotation), horizon (the live jobs' vacuum), wal (SQLite's checkpoints); 0 "
        "while it is not.",
        ["hold"],
    )
    dead = _gauge(
        "skiplock_storage_held_dead_versions",
        "Dead row versions a held upkeep leaves in the live jobs (PostgreSQL): in the held "
        "segments (lock), or that the vacuum could not remove (horizon); 0 while not held.",
        ["hold"],
    )
    wal = _gauge("skiplock_storage_wal_bytes", "The size of SQLite's -wal file at the last look.")
    for kind, gauge in holds:
        held.add_metric([kind], gauge.held_s(now))
        if kind != "wal":
            dead.add_metric([kind], float(gauge.dead_versions or 0))
        elif gauge.wal_bytes is not None:
            wal.add_metric([], float(gauge.wal_bytes))
    # every family always (its help and type), with a series for each kind this worker has
    # looked at: a scrape's names do not depend on which backend, or whether a look happened yet
    yield held
    yield dead
    yield wal


def _histogram(name: str, doc: str, histogram: Histogram) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=[])
    family.add_metric([], histogram.cumulative(), histogram.sum)
    return family


def _seconds(value: float | None) -> float:
    return float("nan") if value is None else value


def database_metrics(cache: GaugeCache) -> Iterator[Metric]:
    """The cached readings' gauges, per queue and per task: of the one database, or, when
    the App has several, of each, every series labelled with its ``database`` (a one-database
    App's series keep the labels they always had)."""
    readings = cache.readings
    assert readings
    by = _Databases(cache.several)
    yield from _by_group("queue", by, [(s, s.queues[:MAX_SERIES]) for s in readings])
    yield from _by_group("task", by, [(s, s.tasks[:MAX_SERIES]) for s in readings])
    window = _gauge("skiplock_stats_window_seconds", "The window of the windowed gauges.")
    window.add_metric([], readings[0].window_s)
    yield window
    age = _gauge("skiplock_stats_age_seconds", "How old the database reading is.")
    age.add_metric([], cache.age_s() or 0.0)
    yield age
    workers = _gauge("skiplock_workers", "Workers whose last registry beat is recent.", by.labels())
    if cache.several:
        for stats in readings:
            beating = sum(1 for w in cache.workers if w.database == stats.database)
            workers.add_metric([stats.database], beating)
    else:
        workers.add_metric([], len(cache.workers))
    yield workers
    yield from _keys(by, readings)
    yield _blocked(by, readings)


class _Databases:
    """The ``database`` label, when the App has several: its name first in each series."""

    def __init__(self, several: bool) -> None:
        self.several = several

    def labels(self, *more: str) -> list[str]:
        return ["database", *more] if self.several else list(more)

    def values(self, stats: Stats, *more: str) -> list[str]:
        return [stats.database, *more] if self.several else list(more)


def _blocked(by: _Databases, readings: Iterable[Stats]) -> Metric:
    """The ordered keys a dead job blocks (each reading's first 10, oldest dead job first),
    each with the live jobs waiting behind it: an alert on any series is an alert on a key
    that will not move until a person acts."""
    waiting = _gauge(
        "skiplock_blocked_key_jobs",
        "Live jobs waiting behind the dead job that blocks their ordered key (first 10 keys).",
        by.labels("key", "dead_job_id"),
    )
    for stats in readings:
        for key in stats.blocked_keys:
            waiting.add_metric(by.values(stats, key.key, str(key.dead_job_id)), key.waiting)
    return waiting


def _keys(by: _Databases, readings: Iterable[Stats]) -> Iterator[Metric]:
    """The busiest concurrency keys' live jobs (each reading's top 10: label cardinality
    stays bounded however many keys there are; a key leaves the series when it leaves the
    top)."""
    jobs = _gauge(
        "skiplock_key_jobs",
        "Live jobs of the busiest concurrency keys (top 10 by running, then ready), by state.",
        by.labels("key", "state"),
    )
    limit = _gauge(
        "skiplock_key_limit",
        "The key_limit of the busiest concurrency keys that have one.",
        by.labels("key"),
    )
    for stats in readings:
        for load in stats.keys:
            for state in ("running", "ready", "pending"):
                jobs.add_metric(by.values(stats, load.key, state), getattr(load, state))
            if load.key_limit is not None:
                limit.add_metric(by.values(stats, load.key), load.key_limit)
    yield jobs
    yield limit


Groups = list[tuple[Stats, Sequence[StatsGroup]]]
"""Each reading with its groups (queues or tasks) to export."""


def _by_group(dim: str, by: _Databases, groups: Groups) -> Iterator[Metric]:
    jobs = _gauge(
        f"skiplock_{dim}_jobs", f"Live jobs per {dim} by state (now).", by.labels(dim, "state")
    )
    age = _gauge(
        f"skiplock_{dim}_backlog_age_seconds",
        f"Now minus the oldest ready job's run_at, per {dim} (0 when none is ready).",
        by.labels(dim),
    )
    for stats, part in groups:
        for g in part:
            for state in QUEUE_STATES:
                jobs.add_metric(by.values(stats, g.name, state), getattr(g, state))
            age.add_metric(by.values(stats, g.name), g.backlog_age_s)
    yield jobs
    yield age
    if dim == "queue":
        yield from _windowed(by, groups)


def _windowed(by: _Databases, groups: Groups) -> Iterator[Metric]:
    """The per-queue numbers over the window."""
    labels = by.labels("queue")
    latency = _gauge(
        "skiplock_queue_claim_latency_seconds",
        "Ready to claimed over the window (quantile 1 is the max).",
        [*labels, "quantile"],
    )
    run = _gauge(
        "skiplock_queue_run_duration_seconds",
        "Run time of jobs finished in the window.",
        [*labels, "quantile"],
    )
    finished = _gauge(
        "skiplock_queue_finished_jobs",
        "Jobs finished in the window, by outcome (completed, cancelled, dead).",
        [*labels, "outcome"],
    )
    attempts = _gauge(
        "skiplock_queue_attempts_jobs",
        "Jobs finished in the window by attempts taken (1, 2, 3, 4+).",
        [*labels, "attempts"],
    )
    reclaimed = _gauge(
        "skiplock_queue_reclaimed_jobs", "Jobs whose lease expired in the window.", labels
    )
    retried = _gauge(
        "skiplock_queue_retried_attempts",
        "Attempts before the last of jobs finished in the window.",
        labels,
    )
    throughput = _gauge(
        "skiplock_queue_throughput_jobs_per_second", "Jobs finished per second.", labels
    )
    for stats, part in groups:
        for g in part:
            q = by.values(stats, g.name)
            for quantile, value in (
                ("0.5", g.claim_latency_p50_s),
                ("0.95", g.claim_latency_p95_s),
                ("1", g.claim_latency_max_s),
            ):
                latency.add_metric([*q, quantile], _seconds(value))
            for quantile, value in (
                ("0.5", g.run_duration_p50_s),
                ("0.95", g.run_duration_p95_s),
            ):
                run.add_metric([*q, quantile], _seconds(value))
            for outcome in FINISHED:  # each a StatsGroup field: completed, cancelled, dead
                finished.add_metric([*q, outcome], getattr(g, outcome))
            counts = (g.attempts_1, g.attempts_2, g.attempts_3, g.attempts_4_plus)
            for bucket, n in zip(("1", "2", "3", "4+"), counts, strict=True):
                attempts.add_metric([*q, bucket], n)
            reclaimed.add_metric(q, g.reclaims)
            retried.add_metric(q, g.retries)
            throughput.add_metric(q, g.throughput_per_s)
    yield from (latency, run, finished, attempts, reclaimed, retried, throughput)


def render(collector: SkiplockCollector) -> bytes:
    """The text exposition of one collector (what ``/metrics`` answers)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return bytes(generate_latest(registry))


# -- serving --------------------------------------------------------------------------------

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class Metered(Protocol):
    """What ``metrics_app`` reads of a worker: its ``meter`` (a ``skiplock.Worker`` has one).
    A protocol: the worker imports this module for its ``/metrics``, so this one names no
    worker class (no import circle)."""

    @property
    def meter(self) -> Meter: ...


def metrics_app(
    app: HealthReads,
    *,
    worker: Metered | None = None,
    refresh_s: float = DEFAULT_REFRESH_S,
    window_s: float = DEFAULT_WINDOW_S,
) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """An ASGI app answering every GET with the metrics text.

    The database gauges are read at most once per ``refresh_s`` in this process (the next
    scrape after that refreshes them first), so a Prometheus scraping every 15 s costs one
    reading per scrape at most. Several replicas each mounting it each read; mount it on one,
    or rely on workers' ``--metrics-port`` (one leader reads for all). With ``worker``, its
    counters are included.
    """
    cache = GaugeCache(window_s)
    cache.leader = True
    lock = asyncio.Lock()
    collector = SkiplockCollector(worker.meter if worker is not None else None, cache)

    async def refresh() -> None:
        async with lock:
            age = cache.age_s()
            if age is not None and age < refresh_s:
                return
            cache.several = app.directory.several
            cache.readings = await read_stats(app, window_s)
            cache.workers = live_workers(await read_workers(app), 3 * refresh_s + 10)
            cache.read_at = time.monotonic()

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await refresh()
        body = render(collector)
        headers = [(b"content-type", CONTENT_TYPE.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return asgi
