"""The records the ``Backend`` operations take and give back: one frozen dataclass per
operation that needs more than an id (``protocol.py`` names the operations), and the bounds
those records carry.

A field added to a params record never changes an operation's signature; nothing here speaks
SQL or imports a dialect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .._job import DEFAULT_LANE, JobFilter, JobState, NewJob, ReclaimedJob

RELEASED_BY_SUPERVISOR = "exited; released by its supervisor"
"""Why ``job_reclaim_worker`` returns a job unless told otherwise (after ``worker <name>``)."""

HOLD_MIN_S = 1.0
"""The youngest transaction ``Backend.storage_hold`` names, in seconds: the queue's own
(claims, completions, heartbeats) last milliseconds, and a rotation tries every half second,
so one open longer is what holds the upkeep back, not a passing claim."""


@dataclass(frozen=True, slots=True)
class JobInsertManyParams:
    """Jobs to insert all or none, ids back in input order. With ``connection`` (the caller's
    own connection: asyncpg, psycopg or sqlite3) the rows join the caller's transaction.
    One per batch, however large: the hot path pays for it once."""

    jobs: Sequence[NewJob]
    connection: object | None = None


@dataclass(frozen=True, slots=True)
class ClaimParams:
    """What a worker asks for when it claims."""

    queues: tuple[str, ...] | None
    limit: int
    worker: str
    lease_token: str
    default_lease: float
    lease_margin: float
    lane: str = "default"
    """The lane claimed from: a claim takes that lane's jobs alone."""


@dataclass(frozen=True, slots=True)
class QueueSetPausedParams:
    queue: str
    paused: bool


QUEUE_LIMITS = frozenset({"max_depth", "max_running", "rate_per_s", "aging_s"})
"""The settings ``QueueSetLimitsParams`` may change."""


@dataclass(frozen=True, slots=True)
class QueueSetLimitsParams:
    """A queue's bound and global limits; None lifts one. Only the settings named in
    ``given`` change (the others keep what the queue's row holds: a person setting one limit
    must not lift another set a minute before)."""

    queue: str
    max_depth: int | None = None
    max_running: int | None = None
    rate_per_s: float | None = None
    aging_s: float | None = None
    """Priority aging: a ready job's effective priority is ``priority + floor(wait / aging_s)``."""
    given: frozenset[str] = QUEUE_LIMITS
    """The settings this call sets (to their value here, None lifting one)."""


@dataclass(frozen=True, slots=True)
class JobActionParams:
    """One job a person acts on (retry, cancel), and who, for its audit trail."""

    job_id: int
    who: str = ""


@dataclass(frozen=True, slots=True)
class JobListParams:
    """Jobs in ``state`` (any if None) matching ``where``."""

    where: JobFilter
    state: JobState | None = None
    before_id: int | None = None
    """Keyset paging: only jobs with a smaller id (the last id of the page before), so a
    page deep in a million rows costs what the first one does (no OFFSET)."""
    oldest_first: bool = False
    """Oldest first (a bulk dead-letter action's order), ``before_id`` then pages forward:
    only jobs with a larger id."""


@dataclass(frozen=True, slots=True)
class DeadActionParams:
    """The dead jobs a person means, and who, for their audit trails."""

    where: JobFilter
    who: str


@dataclass(frozen=True, slots=True)
class JobHeartbeatManyParams:
    """Leases to extend: (id, token) pairs, each by its job's lease, else the defaults.
    ``started``: the pairs whose code has started, marked so (once) in their rows, so a
    job claimed ahead is told from a running one without a write per job start."""

    held: Sequence[tuple[int, str]]
    default_lease: float
    lease_margin: float
    started: frozenset[tuple[int, str]] = frozenset()
    progress: Mapping[int, str] = field(default_factory=dict)
    """Progress records (JSON) to store on some of the held jobs, in the same statement."""
    segments: frozenset[int] | None = None
    """PostgreSQL: the live segments the held jobs were claimed from (``ClaimedJob.segment``),
    so the beat reads those (and the long one) alone; None: look in every segment."""
    lanes: Mapping[int, str] = field(default_factory=dict)
    """The lane of each held job not in ``default`` (``ClaimedJob.lane``): a beat of several
    lanes is one statement a lane."""


@dataclass(frozen=True, slots=True)
class CronSlotClaimParams:
    """One slot of one schedule, and the job it enqueues (unless ``overlap`` is False and
    the schedule's previous run is still live)."""

    schedule: str
    slot: datetime
    job: NewJob
    overlap: bool


@dataclass(frozen=True, slots=True)
class CronSlotSyncParams:
    """One slot of one schedule claimed on the caller's own synchronous connection (sqlite3
    or psycopg) inside the caller's transaction: a Django project's enqueue (on its own
    backend, which may not be skiplock's) then commits or rolls back with the claim.
    ``enqueue`` runs only when this claim took the slot and returns the skiplock job id it
    wrote (None when the job lives elsewhere, such as django-tasks-db's table)."""

    schedule: str
    slot: datetime
    connection: object
    enqueue: Callable[[], int | None]
    created: datetime | None = None
    """When the claim was made, if the caller says (the ledger row's ``created_at``; else now)."""


@dataclass(frozen=True, slots=True)
class JobImportOutcomeParams:
    """The outcome a finished task had in another queue's table, given to the pending job
    just inserted for it (same transaction, caller's own synchronous connection)."""

    connection: object
    job_id: int
    state: str
    """``succeeded`` or ``dead``."""
    attempt: int
    created_at: datetime
    attempted_at: datetime | None
    finished_at: datetime
    result_json: str | None
    errors_json: str
    locked_by: str | None


@dataclass(frozen=True, slots=True)
class TaskPauseParams:
    """Pause a task name everywhere: for ``for_s`` seconds of the database's clock (the
    breaker), or until a person resumes it (None)."""

    task: str
    reason: str
    for_s: float | None = None


@dataclass(frozen=True, slots=True)
class AuditRecordParams:
    """A person action for the audit trail (text checked by the App)."""

    who: str
    what: str
    target: str
    detail: str


@dataclass(frozen=True, slots=True)
class JobPruneParams:
    """Delete one batch of finished rows older, by the database's clock, than their retention:
    succeeded and cancelled rows ``finished_age_s`` after they finished, dead ones
    ``dead_age_s`` after they died."""

    finished_age_s: float
    dead_age_s: float
    batch: int


@dataclass(frozen=True, slots=True)
class HotVacuum:
    """One vacuum of the hot rows: the dead row versions counted before it and left after it
    (those a held MVCC horizon keeps, and what finished while it ran)."""

    dead_before: int
    dead_after: int
    removed: int | None = None
    """What the vacuum itself said it removed (None: it said nothing readable, or skipped)."""
    kept: int | None = None
    """The dead versions it said it could not remove yet: an older transaction may still see
    them (None as ``removed``)."""

    skipped: bool = False
    """Another vacuum (a worker's, autovacuum) held the table: this one did nothing."""

    @property
    def held(self) -> bool:
        """Whether the vacuum kept more than it removed: an old transaction holds the MVCC
        horizon. By the vacuum's own counts where it gave them; else by the statistics (more
        than half of what was counted before still there after), which a busy table can fool
        (as many die while the vacuum runs)."""
        if self.skipped:
            return False
        if self.removed is not None and self.kept is not None:
            return self.kept > self.removed
        return self.dead_after * 2 > self.dead_before


@dataclass(frozen=True, slots=True)
class Rotation:
    """One turn of the live partition's generations (PostgreSQL, postgres_rotation.py).

    ``segment``: the generation retired this turn, else the newest; ``moved``: live jobs moved
    from it to the long segment (and any moved back from a dropped table); ``detached``: its
    table left the claims' sight; ``advanced``: the generation new jobs go to from this turn
    (None: they stay where they were); ``dropped``: detached tables and wrappers dropped;
    ``pending``: generations whose detach waits for sessions that read them before it, and
    ``held_on``: those tables' names; ``held``: something of this turn could not be done (a
    row a worker held, a lock past its short timeout), left for the next turn."""

    segment: int
    moved: int = 0
    detached: bool = False
    held: bool = False
    advanced: int | None = None
    dropped: int = 0
    pending: int = 0
    held_on: tuple[str, ...] = ()
    """The generation tables (and wrappers) whose detach waits for the sessions that read them
    before it, by name, for ``Backend.storage_hold("lock", ...)`` to name who holds them."""


@dataclass(frozen=True, slots=True)
class WalCheckpoint:
    """One passive checkpoint of SQLite's write-ahead log (``Backend.wal_checkpoint``)."""

    wal_bytes: int
    """The ``-wal`` file's size before it."""
    complete: bool | None
    """Whether it copied the whole log into the database: False while a reader's open
    transaction needs what it would overwrite; None: another checkpoint was running, so this
    one says nothing."""
    pending_bytes: int = 0
    """The log's bytes it could not copy back."""
    truncated_to: int | None = None
    """The file's size after a ``TRUNCATE`` checkpoint (run when the log was complete and the
    file above the bound it was given); None: none ran, or it could not finish."""


KEYS_IN_STATS = 10
"""How many of the busiest concurrency keys a statistics reading holds (``skiplock stats``,
the dashboard, the metrics' key gauges): the top of the list, so the labels a scrape exports
stay bounded whatever the number of keys."""


@dataclass(frozen=True, slots=True)
class JobStatsParams:
    """A reading of the health numbers over the window ``window_s`` seconds back from the
    database's now, optionally of one queue and/or one task."""

    window_s: float
    queue: str | None = None
    task: str | None = None


@dataclass(frozen=True, slots=True)
class JobStatsRows:
    """What a statistics reading returns, per (queue, task) where counts add up, and ranked per
    queue, task and overall ("all", "") where they do not (percentiles)."""

    now: datetime
    live: list[tuple[Any, ...]]
    """(queue, task, ready, scheduled, retrying, claimed, running, oldest ready run_at as
    epoch seconds or None)."""
    finished: list[tuple[Any, ...]]
    """(queue, task, succeeded, cancelled, dead, attempts_1, _2, _3, _4_plus, retries)."""
    reclaims: list[tuple[Any, ...]]
    """(queue, task, reclaims)."""
    ranks: list[tuple[Any, ...]]
    """(dim, key, kind "claim" | "run", p50, p95, max) in seconds."""
    blocked: list[tuple[Any, ...]] = field(default_factory=list)
    """The ordered keys a dead job holds: (key, dead_job_id, waiting), oldest first."""
    keys: list[tuple[Any, ...]] = field(default_factory=list)
    """The busiest concurrency keys: (key, running, ready, pending, key_limit), busiest first
    (JOB_BUSIEST_KEYS, KEYS_IN_STATS of them)."""


@dataclass(frozen=True, slots=True)
class WorkerBeatParams:
    """One worker's registry row as its maintenance beat reports it."""

    id: str
    name: str
    host: str
    pid: int
    queues: tuple[str, ...] | None
    concurrency: int
    running: int
    processed: int
    claimed_ago_s: float | None
    """Seconds since its last claim (None: never claimed)."""
    gone_after_s: float | None = None
    """The silence after which it counts as gone (``WorkerInfo.gone_after_s``)."""
    process: str | None = None
    """Which OS process it is (``WorkerInfo.process``)."""
    restarts: int = 0
    restarts_in_a_row: int = 0
    children: str | None = None
    """Its process tasks' child processes now, as JSON (``WorkerInfo.children``); None:
    none running."""


@dataclass(frozen=True, slots=True)
class JobBusiestKeysParams:
    """The ``limit`` busiest concurrency keys of one queue and/or task (None: any)."""

    limit: int
    queue: str | None = None
    task: str | None = None


@dataclass(frozen=True, slots=True)
class AuditListParams:
    """A page of the audit trail, newest first: at most ``limit`` before id ``before_id``."""

    limit: int
    before_id: int | None


@dataclass(frozen=True, slots=True)
class AuditPruneParams:
    """One batch (at most ``batch``) of audit entries older than ``age_s`` seconds to delete."""

    age_s: float
    batch: int


@dataclass(frozen=True, slots=True)
class JobFindParams:
    """At most ``limit`` jobs whose unique key or correlation id is exactly ``text``."""

    text: str
    limit: int


@dataclass(frozen=True, slots=True)
class StorageHoldParams:
    """Which hold (``HOLD_KINDS``) to name, how old a transaction it names, and on what."""

    hold: str
    min_age_s: float = HOLD_MIN_S
    relations: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class JobReclaimWorkerParams:
    """One worker's leases to release, why, and a list the released jobs are added to."""

    worker_id: str
    into: list[ReclaimedJob] | None = None
    why: str = RELEASED_BY_SUPERVISOR
    lane: str = DEFAULT_LANE
    """The lane whose leases are released (a worker of several lanes: one call a lane)."""


@dataclass(frozen=True, slots=True)
class CronSlotsPruneSyncParams:
    """Claimed cron slots before ``before`` to delete on the caller's own sync connection."""

    connection: object
    before: datetime
