"""Frozen, validated configuration. Durations are always float seconds."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from ._lanes import check_lane_name
from ._limits import MAX_BATCH, MAX_CONCURRENCY, MAX_INT, check_int, check_seconds, check_text
from .errors import ConfigurationError

DEFAULT_MAX_ATTEMPTS = 5
MAX_MEMORY_MB = 2**20
"""The largest ``max_memory_per_child_mb`` (1 TiB)."""
"""A job that fails five times is dead: enough to ride out a short outage with the default
backoff (1 s, 2 s, 4 s, 8 s with full jitter), few enough that a poison job surfaces fast."""


def require(condition: bool, field_name: str, value: object, rule: str) -> None:
    """Raise a ConfigurationError naming the field and the bad value."""
    if not condition:
        raise ConfigurationError(f"{field_name}={value!r}: {rule}")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter: ``uniform(0, min(cap_s, base_s * 2**(attempt-1)))``.

    Full jitter spreads a burst of jobs that failed together (a dependency went down) over the
    whole window instead of retrying them in lockstep.
    """

    base_s: float = 1.0
    """Seconds of the first retry window (0 to 10 years)."""
    cap_s: float = 600.0
    """The longest a retry is ever delayed, in seconds (``base_s`` to 10 years)."""
    jitter: bool = True
    """Full jitter when true; the plain exponential delay when false (deterministic)."""

    def __post_init__(self) -> None:
        check_seconds("RetryPolicy.base_s", self.base_s)
        check_seconds("RetryPolicy.cap_s", self.cap_s, minimum=self.base_s)

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before the attempt after ``attempt`` (1-based); never overflows."""
        # 2**64 times the largest base is still a finite float; 2.0**1024 would raise.
        exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
        ceiling = min(self.cap_s, self.base_s * 2.0**exponent)
        if not self.jitter:
            return ceiling
        return (rng or random).uniform(0.0, ceiling)


_MAX_EXPONENT = 64


@dataclass(frozen=True)
class Breaker:
    """Pause a task when it keeps failing: ``threshold`` failures within ``window_s`` seconds
    (counted by each worker) pause it everywhere for ``cooldown_s`` seconds, then it resumes."""

    threshold: int = 5
    window_s: float = 60.0
    cooldown_s: float = 30.0

    def __post_init__(self) -> None:
        check_int("Breaker.threshold", self.threshold, 1)
        check_seconds("Breaker.window_s", self.window_s, open_=True)
        check_seconds("Breaker.cooldown_s", self.cooldown_s, open_=True)


@dataclass(frozen=True)
class WorkerConfig:
    """How one worker process runs; every field has a documented default."""

    queues: tuple[str, ...] | None = None
    """Queues to claim from; None means every queue."""
    concurrency: int = 10
    """Jobs running at once in this process (async and sync alike)."""
    poll_interval_s: float = 1.0
    """The poll backstop: the longest an idle worker waits before asking again."""
    shutdown_timeout_s: float = 30.0
    """On SIGTERM, how long running jobs may finish before they are released to pending."""
    claim_batch: int = 500
    """The most rows one claim statement locks; each claim takes what the window has room
    for, up to this."""
    prefetch: int | None = None
    """Jobs claimed ahead, waiting for a slot, so a freed slot starts its next job without a
    round trip. None (the default) adapts by Little's law: the jobs the slots would start
    during two claim round trips at the mean duration seen (``concurrency`` to 1,000), none
    before the first job finishes or while jobs take over a second; jobs held ahead are
    given back once every slot has been busy for a second (a long job is better left in the
    table for an idle worker). 0 never claims ahead."""
    completion_batch: int = 500
    """The most outcomes written in one round trip."""
    lease_margin_s: float = 30.0
    """Added to a job's timeout to form its lease, in seconds. (One thing, two names: a
    task's lease is ``visibility_timeout`` in the API and ``lease_s`` in the jobs table.)"""
    # Short because the heartbeat (at most every 5 s, a twelfth of 60 s) renews it while the
    # worker lives: a worker killed without a supervisor frees such a job within a minute,
    # not 330 s (the old default). The trade: a database away for longer than the lease lets
    # another worker reclaim a job this one still runs (fencing rejects the loser's writes).
    default_lease_s: float = 30.0
    """Lease of a job whose task has no timeout, in seconds (with the margin: 60 s);
    heartbeats renew it while the worker lives."""
    maintenance_interval_s: float = 5.0
    """How often this worker reclaims leases that expired anywhere, in seconds."""
    retention_finished_s: float = 7 * 86400.0
    """Succeeded and cancelled rows are deleted this long after they finished (7 days)."""
    retention_dead_s: float = 30 * 86400.0
    """Dead rows are deleted this long after they died (30 days), leaving time for review."""
    retention_audit_s: float = 90 * 86400.0
    """Audit trail entries (person actions, refused actions and sign-ins) are deleted this
    long after they were written (90 days)."""
    prune_interval_s: float = 60.0
    """How often this worker prunes, in bounded batches."""
    vacuum_interval_s: float = 1.0
    """PostgreSQL: how often this worker reads how many dead row versions the live jobs' table
    holds, and vacuums it past 10,000 (one worker at a time; the pause doubles, up to 30 s,
    while an old transaction elsewhere keeps them). 0: leave it to autovacuum, which comes
    once a minute. SQLite: how often it checkpoints the write-ahead log (passive: it never
    waits), says when a reader keeps it from completing, and shrinks a -wal file past 64 MB
    once none does. 0: leave the log to SQLite's own checkpoints."""
    rotate_interval_s: float = 0.5
    """PostgreSQL: how often this worker looks at the live jobs' ring segment due to be
    cleared (one worker at a time): its leftover jobs move aside and it is truncated, so a
    held MVCC horizon's dead versions leave with it. 0: never truncate (vacuum alone)."""
    scheduler: bool = True
    """Run the app's cron schedules inside this worker (it costs nothing without schedules);
    with several databases, those whose jobs go to this worker's database."""
    database: str | None = None
    """Which of the app's databases this worker serves: a name given in App(databases=), or
    "default", the App's own URL. None: every one, each with its own claims, leases,
    wake-ups and upkeep, the concurrency shared out between them."""
    name: str = field(default="")
    """How this worker signs its claims (locked_by); defaults to host:pid."""
    metrics_port: int | None = None
    """Serve Prometheus metrics on this port at /metrics (the skiplock[prometheus] extra); with
    --processes N, process i serves port + i. None: no metrics endpoint."""
    health_port: int | None = None
    """Serve /livez and /readyz (every service ready) on this port, for Kubernetes probes; it
    may equal metrics_port. With --processes N, process i serves port + i."""
    http_host: str = "127.0.0.1"
    """The address the metrics and health ports listen on (loopback, like the dashboard;
    0.0.0.0 for a scraper or a Kubernetes probe, which reaches the pod's IP)."""
    stats_refresh_s: float = 5.0
    """How often the database gauges of /metrics are recomputed (by one worker for all)."""
    log_summary_interval_s: float = 60.0
    """How often the worker logs one INFO line of what it did (jobs started, each outcome,
    the rate, the mean run time); a job's routine events (started, succeeded, snoozed,
    released) log at DEBUG. 0: no summary line."""
    sync_executor: Literal["thread", "process"] = "thread"
    """Where sync tasks that do not name their own ``executor`` run: a thread of this
    worker, or a child process of its pool, which a timeout kills (docs/guides/processes.md)."""
    child_processes: int | None = None
    """How many child processes process tasks may run in at once (None: ``concurrency``);
    started as jobs need them."""
    max_tasks_per_child: int | None = None
    """A child process is replaced after this many jobs (None: never)."""
    max_memory_per_child_mb: float | None = None
    """A child process whose resident memory passed this many MiB after a job is replaced
    (None: never); the job that crossed the line finishes first."""
    kill_grace_s: float = 5.0
    """How long a child process told to stop by a timeout (SIGTERM) may take before it is
    killed (SIGKILL)."""

    def __post_init__(self) -> None:
        check_int("concurrency", self.concurrency, 1, MAX_CONCURRENCY)
        check_int("claim_batch", self.claim_batch, 1, MAX_BATCH)
        check_int("completion_batch", self.completion_batch, 1, MAX_BATCH)
        if self.prefetch is not None:
            check_int("prefetch", self.prefetch, 0, MAX_CONCURRENCY)
        for name in _POSITIVE_DURATIONS:  # zero would spin a loop or expire every row at once
            check_seconds(name, getattr(self, name), open_=True)
        for name in (
            "shutdown_timeout_s",
            "lease_margin_s",
            "log_summary_interval_s",
            "vacuum_interval_s",
            "rotate_interval_s",
        ):
            check_seconds(name, getattr(self, name))
        for name in ("metrics_port", "health_port"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 0, 65535)
        check_text("http_host", self.http_host)
        self._check_processes()
        if self.name:  # the live-worker table's key (name:random); "" means host:pid
            check_text("name", self.name)
        if self.database is not None:
            check_lane_name("database", self.database)
        if self.queues is not None:
            require(len(self.queues) > 0, "queues", self.queues, "must name at least one queue")
            for queue in self.queues:
                check_text("queues", queue)

    def _check_processes(self) -> None:
        """The process executor's fields (docs/guides/processes.md)."""
        require(
            self.sync_executor in ("thread", "process"),
            "sync_executor",
            self.sync_executor,
            "must be 'thread' or 'process'",
        )
        if self.child_processes is not None:
            check_int("child_processes", self.child_processes, 1, MAX_CONCURRENCY)
        if self.max_tasks_per_child is not None:
            check_int("max_tasks_per_child", self.max_tasks_per_child, 1, MAX_INT)
        if self.max_memory_per_child_mb is not None:
            mb = self.max_memory_per_child_mb
            finite = isinstance(mb, int | float) and not isinstance(mb, bool)
            require(
                finite and 1 <= mb <= MAX_MEMORY_MB,
                "max_memory_per_child_mb",
                mb,
                f"must be a number of MiB between 1 and {MAX_MEMORY_MB}",
            )
        check_seconds("kill_grace_s", self.kill_grace_s)


_POSITIVE_DURATIONS = (
    "poll_interval_s",
    "default_lease_s",
    "maintenance_interval_s",
    "retention_finished_s",
    "retention_dead_s",
    "retention_audit_s",
    "prune_interval_s",
    "stats_refresh_s",
)


class WorkerOptions(TypedDict, total=False):
    """``WorkerConfig``'s fields as keyword arguments: ``Worker(app, concurrency=20)`` is
    type-checked like ``Worker(app, WorkerConfig(concurrency=20))``. A test keeps the two in
    step; the defaults live on ``WorkerConfig`` alone."""

    queues: tuple[str, ...] | None
    concurrency: int
    poll_interval_s: float
    shutdown_timeout_s: float
    claim_batch: int
    prefetch: int | None
    completion_batch: int
    lease_margin_s: float
    default_lease_s: float
    maintenance_interval_s: float
    retention_finished_s: float
    retention_dead_s: float
    retention_audit_s: float
    prune_interval_s: float
    vacuum_interval_s: float
    rotate_interval_s: float
    scheduler: bool
    database: str | None
    name: str
    metrics_port: int | None
    health_port: int | None
    http_host: str
    stats_refresh_s: float
    log_summary_interval_s: float
    sync_executor: Literal["thread", "process"]
    child_processes: int | None
    max_tasks_per_child: int | None
    max_memory_per_child_mb: float | None
    kill_grace_s: float
