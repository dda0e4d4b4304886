"""The nouns of a job as they cross the backend boundary.

Backends speak only these dataclasses; nothing above a backend sees a database row.
"""

from __future__ import annotations

import contextvars
import enum
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, overload

from ._config import require
from ._limits import MAX_TEXT_CHARS

if TYPE_CHECKING:
    from ._durable import Durable, DurableSource
    from ._job_log import JobLog
    from ._workflow_records import ReceivedSignal


class JobState(enum.StrEnum):
    """The six states a job row can be in."""

    PENDING = "pending"
    """Waiting: new, scheduled for later, or awaiting a retry."""
    RUNNING = "running"
    """Claimed by a worker that holds its lease."""
    SUCCEEDED = "succeeded"
    CANCELLED = "cancelled"
    DEAD = "dead"
    """Attempts spent, a permanent error, or a job no worker can run; a person may requeue it."""
    WAITING = "waiting"
    """Not claimable yet: waiting for its parents (``depends_on``, a chain, a chord, a
    batch's callback), or parked on a signal (``job.wait_for``) without holding a worker."""

    @classmethod
    def live(cls) -> frozenset[JobState]:
        """The states a unique key is held in and a queue's depth counts."""
        return frozenset({cls.PENDING, cls.RUNNING})

    @classmethod
    def final(cls) -> frozenset[JobState]:
        """The states a job never leaves on its own."""
        return frozenset({cls.SUCCEEDED, cls.CANCELLED, cls.DEAD})


DEFAULT_LANE = "default"
"""The lane of a job no directory routes elsewhere: a database of one lane has this one
(docs/design.md, "Every job carries a lane")."""


@dataclass(slots=True)
class NewJob:
    """One row to insert. ``args_json``/``kwargs_json`` are already strict JSON.

    Not frozen: bulk enqueue builds one per job, and a frozen dataclass's ``__init__`` sets
    each of these fourteen fields through ``object.__setattr__`` (2.0 µs a job against 0.6).
    """

    task: str
    queue: str
    args_json: str
    kwargs_json: str
    priority: int
    max_attempts: int
    run_after_s: float | None = None
    """Seconds after the database's now(); None means now."""
    run_at: datetime | None = None
    """An absolute time, used instead of ``run_after_s`` when given."""
    timeout: float | None = None
    correlation_id: str | None = None
    lease_s: float | None = None
    """An explicit visibility timeout; None means the task's timeout plus the worker's margin."""
    unique_key: str | None = None
    """While a live (pending or running) job of this task has this key, no second one is
    created."""
    unique_shared: bool = False
    """The key is in the shared key space (``unique_scope="shared"``), where the jobs of
    every task that shares hold it alike; False: the task's own (``"task"``, the default)."""
    on_duplicate: str = "return"
    """When a job holds the key already: ``return`` it, ``raise`` DuplicateJob, or
    ``replace`` its arguments and run time if it is still pending (``on_conflict``)."""
    unique_succeeded: bool = False
    """The key stays taken after the job succeeds (``unique_while="live_or_succeeded"``, or
    within ``unique_for_s``)."""
    unique_for_s: float | None = None
    """The key stays taken this long after the enqueue, even once the job succeeded (the
    row's ``unique_until``); None: while ``unique_while`` says."""
    debounce: bool = False
    """A debounced enqueue (``debounce=``): it replaces a pending holder, and takes the key
    from one already running (a new job runs with these arguments afterwards)."""
    trace_context: str | None = None
    """The enqueuing span's W3C trace context as JSON (the otel extra sets it), or None."""
    payload_version: int = 1
    """The enqueuing task's ``version``: which shape of arguments the row holds."""
    concurrency_key: str | None = None
    """Jobs with one key run at most ``key_limit`` at once, everywhere, and a claim takes
    from keys in turn (docs/guide/keys.md)."""
    key_limit: int | None = None
    """How many jobs with this job's key may run at once (None: no cap, turns only)."""
    key_order: str | None = None
    """An ordered key's (``ordering_key``): its jobs run one at a time in enqueue order, and
    a dead one ``block``s the key until a person acts, or is ``skip``ped; None: unordered."""
    key_weight: int | None = None
    """How many jobs the key takes a turn (None: 1); 0: no turns (``fair=False``), its
    jobs by priority and age alone."""
    depends_on: tuple[int, ...] = ()
    """Ids of jobs this one waits for (``state = 'waiting'``) until every one succeeded."""
    on_parent_failure: str = "cancel"
    """When a parent ends dead or cancelled (or is gone): ``cancel`` this job (the reason
    recorded), ``run`` it anyway, or ``wait`` (for a person to retry the parent)."""
    lane: str = DEFAULT_LANE
    """The lane the job is in (docs/design.md, "Every job carries a lane"): only a claim of
    this lane takes it, and its outcomes, heartbeats and releases name it. A database no
    directory shares out has one lane, ``default``."""


@dataclass(slots=True)
class ClaimedJob:
    """A job a worker holds: what the executor needs, and the token that fences its writes.

    Not frozen, as NewJob: a worker builds one per job, and a frozen dataclass sets each field
    through ``object.__setattr__`` (2.4 us a job here, measured); nothing changes one."""

    id: int
    task: str
    queue: str
    args_json: str
    kwargs_json: str
    priority: int
    attempt: int
    max_attempts: int
    timeout: float | None
    lease_token: str
    created_at: datetime
    lease_expires_at: datetime
    lease_s: float = 0.0
    """How long each lease (and each heartbeat's extension) lasts."""
    correlation_id: str | None = None
    trace_context: str | None = None
    """The enqueuing span's W3C trace context (JSON), for the run's span; None: untraced."""
    payload_version: int = 1
    """The version of the task's arguments the row holds (a row from before migration 9: 1)."""
    segment: int | None = None
    """PostgreSQL: the live segment the row was in when claimed, so its outcome reads only
    that one and the long one (None: any; SQLite)."""
    run_at: datetime | None = None
    """When the job became due (its ``run_after``, else its enqueue or its retry's time), the
    claim's order after priority: jobs claimed together start in that order, as one claimed
    alone would (None: the keyed claim's rows, which do not return it)."""
    lane: str = DEFAULT_LANE
    """The lane the job is in: its outcome and heartbeats are written in that lane."""


class Disposition(enum.StrEnum):
    """What a completion does to a running row."""

    SUCCEED = "succeeded"
    RETRY = "retry"
    """Back to pending after a delay, error recorded, attempt kept."""
    SNOOZE = "snooze"
    """Back to pending after a delay, the attempt given back."""
    RELEASE = "release"
    """Back to pending now, the attempt given back (shutdown)."""
    PARK = "park"
    """Waiting for a signal (``job.wait_for``) until the delay's end, the attempt given back:
    no lease, no worker slot; a signal or the timeout makes it pending again."""
    CANCEL = "cancelled"
    DEAD = "dead"


@dataclass(slots=True)
class Completion:
    """One outcome to write, applied only if the row is still running under ``lease_token``.

    Not frozen, for the same reason as ClaimedJob (one a job; 1.6 us frozen, measured)."""

    job_id: int
    lease_token: str
    disposition: Disposition
    delay_s: float = 0.0
    error: dict[str, Any] | None = None
    """``{"attempt", "at", "message", "type", "traceback", "worker"}``; appended to the job's
    bounded error list (``worker``: the name of the worker that ran the attempt)."""
    lease_s: float | None = None
    """The job's lease length: until the outcome is written the worker still heartbeats it."""
    result_json: str | None = None
    """What the task returned, as strict JSON (None: returned None, or the task keeps none)."""
    progress_json: str | None = None
    """A progress record the job reported after the last heartbeat (None: none)."""
    run_s: float | None = None
    """How long the attempt ran, by its worker's monotonic clock (None: it never started)."""
    queue: str = ""
    task: str = ""
    """The job's queue and task, for the worker's own counters (never written)."""
    on_recorded: Callable[[], None] | None = None
    """Logs the outcome, called once the row took it (never for a lease lost, or an outcome
    replaced by a dead-letter), so a log line says what the table holds."""
    segment: int | None = None
    """``ClaimedJob.segment`` (None: any segment)."""
    lane: str = DEFAULT_LANE
    """``ClaimedJob.lane``: the outcome is written in that lane (a batch of several, one
    statement a lane)."""
    log: JobLog | None = None
    """What the attempt logged (its task keeps logs: ``job_log=True``), written just before
    the outcome; None: nothing to write."""


@dataclass(frozen=True, slots=True)
class ReclaimedJob:
    """A job the lease sweep just took back, as it now stands (for its log event)."""

    id: int
    task: str
    queue: str
    state: JobState
    """pending again, dead (attempts spent) or cancelled (a person asked)."""
    attempt: int
    max_attempts: int
    correlation_id: str | None
    lost_by: str | None
    """The worker whose lease expired."""


class SlotOutcome(enum.StrEnum):
    """What claiming one cron slot did."""

    ENQUEUED = "enqueued"
    TAKEN = "taken"
    """Another scheduler claimed this slot first."""
    SKIPPED = "skipped"
    """Claimed, but the previous run was still live and the schedule forbids overlap."""


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A full job row, for people and tests: inspection, not execution."""

    id: int
    task: str
    queue: str
    state: JobState
    args: list[Any]
    kwargs: dict[str, Any]
    priority: int
    attempt: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    attempted_at: datetime | None
    finished_at: datetime | None
    locked_by: str | None
    lease_expires_at: datetime | None
    errors: list[dict[str, Any]] = field(default_factory=list)
    correlation_id: str | None = None
    audit: list[dict[str, Any]] = field(default_factory=list)
    """What people did to this job: ``{"at", "who", "what"}`` per action."""
    problems: list[str] = field(default_factory=list)
    """What could not be read as written (``"args: not JSON: ..."``, a run_at beyond year
    9999), shown as far as it could be: an odd row is listed with a note, never an error."""
    started_at: datetime | None = None
    """When a running job's code started, as its worker's heartbeat reported it; None while
    it is only claimed ahead (``claimed``), or started too recently to have been reported."""

    @property
    def claimed_only(self) -> bool:
        """Running in the row, but not (yet reported) started: claimed ahead by a worker."""
        return self.state is JobState.RUNNING and self.started_at is None

    result: Any = None
    """What the task returned (decoded JSON), once it succeeded; None otherwise."""
    progress: dict[str, Any] | None = None
    """The last ``set_progress`` record: ``{"fraction", "message", "at"}``, or None."""
    payload_version: int = 1
    """The version of the task's arguments the row holds (``@app.task(version=...)``)."""
    unique_key: str | None = None
    """The job's unique key (``unique_key=``, ``debounce=``); None: none, or given up to a
    newer debounced job while this one ran."""
    unique_until: datetime | None = None
    """Until when the key stays taken once the job succeeded (``unique_for=``)."""
    concurrency_key: str | None = None
    """Its concurrency or ordering key (``concurrency_key=``, ``ordering_key=``)."""
    key_limit: int | None = None
    """How many jobs of its key may run at once (an ordering key's: 1)."""
    key_order: str | None = None
    """``block`` or ``skip`` for an ordered key's job (``ordering_on_dead``); None: unordered."""
    key_weight: int | None = None
    """Jobs its key takes a turn (``key_weight=``; None: 1); 0: no turns (``fair=False``)."""
    lane: str = DEFAULT_LANE
    """The lane it went to (``"default"`` unless routed: docs/scaling.md)."""
    database: str = "default"
    """The database it is in (an App with ``databases=`` has several; its id names it)."""

    @property
    def worker(self) -> str | None:
        """The worker that ran (or runs) the latest attempt: ``host:pid:...``."""
        return self.locked_by


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """Where a waited-for job stands: what ``handle.result()`` needs and nothing more."""

    id: int
    state: JobState
    result_json: str | None = None
    """The stored result of a succeeded job (None: it returned None or keeps none)."""
    last_error: dict[str, Any] | None = None
    """The last recorded error of a dead or cancelled job."""


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs a person means; every field narrows, None means any."""

    ids: tuple[int, ...] | None = None
    task: str | None = None
    queue: str | None = None
    error: str | None = None
    """Text that must appear in one of the job's recorded error messages, in any case
    (``"timeout"`` finds ``JobTimeout: timed out``); literal: ``%``, ``_``, quotes and
    backslashes are just characters. The same on both backends."""
    since: datetime | None = None
    """Finished (or, if unfinished, created) at or after."""
    until: datetime | None = None
    """Finished (or, if unfinished, created) before."""
    last_error: str | None = None
    """The job's last recorded error message, exactly ('' for a job without one): a
    dead-letter group's key (``DeadGroup.error``), so an action on the group reaches it and
    no other group whose message merely contains the text."""
    limit: int = 100
    """At most this many: a list shows that many, and ``requeue_dead``/``discard_dead`` act on
    at most that many, the oldest first (``list_jobs(..., oldest_first=True)`` shows them)."""


def progress_record(fraction: float, message: str) -> str:
    """A progress record as JSON, after checking what the task passed."""
    require(
        isinstance(fraction, int | float) and not isinstance(fraction, bool),
        "fraction",
        fraction,
        "must be a number from 0 to 1",
    )
    require(math.isfinite(fraction) and 0 <= fraction <= 1, "fraction", fraction, "must be 0..1")
    require(isinstance(message, str), "message", message, "must be a str")
    require(
        len(message) <= MAX_TEXT_CHARS and "\x00" not in message,
        "message",
        message[:50],
        f"must be at most {MAX_TEXT_CHARS} characters, without NUL",
    )
    record = {"fraction": float(fraction), "message": message, "at": datetime.now(UTC).isoformat()}
    return json.dumps(record, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a running task may know about its own job, to make itself idempotent.

    Read it with ``skiplock.current_job()`` from inside a task (async or sync).
    """

    id: int
    task: str
    queue: str
    attempt: int
    max_attempts: int
    enqueued_at: datetime
    deadline: datetime | None
    """When the job's timeout expires (monotonic deadlines are not shareable), or None."""
    lease_expires_at: datetime
    report: Callable[[int, str], None] | None = field(default=None, repr=False, compare=False)
    """Where ``set_progress`` leaves its record (the worker's progress board)."""
    durable: Durable | None = field(default=None, repr=False, compare=False)
    """Steps, waits and parent results (None: an eager run, which has no database)."""

    def _store(self) -> Durable:
        if self.durable is None:
            raise RuntimeError(
                "steps, wait_for and parent_results need a worker's job (not an eager run)"
            )
        return self.durable

    async def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once for this job and keep its result: a retry, a
        reclaim after a crash or a resume after ``wait_for`` returns the stored result
        instead of running it again (async functions are awaited, sync ones run in a thread).
        The result must be strict JSON, as a job's result.

        A step is known by its name and call order: the n-th step named ``name`` of a run is
        the n-th of every run, so a step in a loop runs once per turn and a re-run gets the
        stored results back in the same order (as Temporal and DBOS replay)."""
        return await self._store().step(name, fn, *args, **kwargs)

    @overload
    async def wait_for(
        self,
        name: str,
        timeout: float | timedelta | None = None,
        *,
        with_sender: Literal[False] = False,
    ) -> Any: ...

    @overload
    async def wait_for(
        self, name: str, timeout: float | timedelta | None = None, *, with_sender: Literal[True]
    ) -> ReceivedSignal: ...

    async def wait_for(
        self, name: str, timeout: float | timedelta | None = None, *, with_sender: bool = False
    ) -> Any:
        """The payload of the next signal ``name`` (``app.signal(job_id, name, payload)``).

        The signals of a name are kept in the order they come, and each ``wait_for(name)``
        takes the next: the n-th wait of a run takes the n-th signal, in every run. If it has
        not come, the job parks: this attempt ends (no lease, no worker slot, the attempt
        given back) and the job runs again from the top when the signal comes or ``timeout``
        (seconds or a timedelta; None: 366 days) passes; its ``wait_for`` then returns the
        payload, or raises SignalTimeout (a timed-out wait's place in the order is its
        timeout). Code before it that must not run twice belongs in ``step``s.

        ``with_sender=True`` returns a ReceivedSignal instead: the payload, who sent it (the
        ``who`` of ``app.signal``, ``"<user> via dashboard"`` from the dashboard) and when,
        for a decision that must rest on who made it rather than on what the payload says."""
        return await self._store().wait_for(name, timeout, with_sender)

    async def parent_results(self) -> dict[int, Any]:
        """The results of this job's parents that succeeded, by job id, in ``depends_on``
        order (kept on the edge: readable after a parent's row was pruned)."""
        return await self._store().parent_results()

    def step_sync(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``step`` for a sync task (from its thread; ``fn`` runs on that thread)."""
        return self._store().step_sync(name, fn, *args, **kwargs)

    @overload
    def wait_for_sync(
        self,
        name: str,
        timeout: float | timedelta | None = None,
        *,
        with_sender: Literal[False] = False,
    ) -> Any: ...

    @overload
    def wait_for_sync(
        self, name: str, timeout: float | timedelta | None = None, *, with_sender: Literal[True]
    ) -> ReceivedSignal: ...

    def wait_for_sync(
        self, name: str, timeout: float | timedelta | None = None, *, with_sender: bool = False
    ) -> Any:
        """``wait_for`` for a sync task (from its thread)."""
        return self._store().wait_for_sync(name, timeout, with_sender)

    def parent_results_sync(self) -> dict[int, Any]:
        """``parent_results`` for a sync task (from its thread)."""
        return self._store().parent_results_sync()

    async def set_progress(self, fraction: float, message: str = "") -> None:
        """Report how far the job is (0..1) and what it is doing; stored with the worker's
        next heartbeat, at most once a second, never a round trip per call."""
        self.set_progress_sync(fraction, message)

    def set_progress_sync(self, fraction: float, message: str = "") -> None:
        """``set_progress`` for a sync task (callable from its thread)."""
        record = progress_record(fraction, message)
        if self.report is not None:
            self.report(self.id, record)


class StartedJob:
    """A running job's context before anyone asked for it: the claimed row, its timeout and
    the wall time it started, turned into a ``JobContext`` on the first ``current_job()``.

    Most tasks never ask, and building the frozen context (nine fields, a clock read, a
    deadline) cost 1.8 us of the ~20 a no-op job takes in a worker (benchmarks/HISTORY.md,
    "Step two alone"); this costs a tenth of that. The context built is kept, so every
    call in one attempt sees the same object, whichever thread makes it."""

    __slots__ = ("built", "job", "report", "started", "store", "timeout")

    def __init__(
        self,
        job: ClaimedJob,
        timeout: float | None,
        report: Callable[[int, str], None] | None,
        started: float,
        store: DurableSource | None = None,
    ) -> None:
        self.store = store
        """Where its steps and waits go (None: a run with no database)."""
        self.job = job
        self.timeout = timeout
        self.report = report
        self.started = started
        """``time.time()`` when the attempt started: its deadline counts from here."""
        self.built: JobContext | None = None

    def context(self) -> JobContext:
        built = self.built
        if built is None:
            job, timeout = self.job, self.timeout
            deadline = datetime.fromtimestamp(self.started + timeout, UTC) if timeout else None
            built = self.built = JobContext(
                id=job.id,
                task=job.task,
                queue=job.queue,
                attempt=job.attempt,
                max_attempts=job.max_attempts,
                enqueued_at=job.created_at,
                deadline=deadline,
                lease_expires_at=job.lease_expires_at,
                report=self.report,
                durable=self._durable(),
            )
        return built

    def _durable(self) -> Durable | None:
        if self.store is None:
            return None
        from ._durable import Durable

        job = self.job
        return Durable(self.store, job.id, job.lease_token, job.task)


_current: contextvars.ContextVar[JobContext | StartedJob] = contextvars.ContextVar("skiplock_job")


def current_job() -> JobContext:
    """The job the calling task is running as; raises LookupError outside a job."""
    try:
        ctx = _current.get()
    except LookupError:
        raise LookupError("current_job() called outside a running skiplock job") from None
    return ctx.context() if isinstance(ctx, StartedJob) else ctx


def current_attempt_and_deadline() -> tuple[int, datetime | None]:
    """``current_job()``'s ``attempt`` and ``deadline`` without building the context when no
    one has yet (a wrapper that asks on every run, as Django's does, would build it for every
    job: ~6 us of a no-op's ~80 here, measured); raises LookupError outside a job."""
    try:
        ctx = _current.get()
    except LookupError:
        raise LookupError("current_job() called outside a running skiplock job") from None
    if isinstance(ctx, StartedJob):
        if ctx.built is None:
            timeout = ctx.timeout
            deadline = datetime.fromtimestamp(ctx.started + timeout, UTC) if timeout else None
            return ctx.job.attempt, deadline
        ctx = ctx.built
    return ctx.attempt, ctx.deadline


def set_current_job(ctx: JobContext | StartedJob) -> contextvars.Token[JobContext | StartedJob]:
    return _current.set(ctx)


def reset_current_job(token: contextvars.Token[JobContext | StartedJob]) -> None:
    _current.reset(token)


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A queue's settings (stored in the database, shared by every producer and worker)."""

    name: str
    max_depth: int | None
    max_running: int | None
    rate_per_s: float | None
    paused: bool
    pending: int
    running: int
    """Running jobs whose worker reported them started."""
    claimed: int = 0
    """Running in the row but not (yet reported) started: claimed ahead by a worker."""
    aging_s: float | None = None
    """Priority aging (None: off): a ready job gains one priority step per ``aging_s`` of wait."""
    database: str = "default"
    """The database this reading is of (an App with ``databases=`` has several)."""


@dataclass(frozen=True, slots=True)
class KeyLoad:
    """One concurrency key's live jobs now (``App.busiest_keys``)."""

    key: str
    running: int
    """Its jobs running (claimed ahead or started) on any worker."""
    ready: int
    """Its pending jobs whose run_at has come: waiting for a claim, or for room under its
    limit."""
    pending: int
    """All its pending jobs (ready and scheduled)."""
    key_limit: int | None
    """The largest ``key_limit`` its live jobs carry (None: no cap)."""
    database: str = "default"
    """The database this row is of (an App with ``databases=`` has several)."""


@dataclass(frozen=True, slots=True)
class BlockedKey:
    """An ordered key a dead job holds (``ordering_on_dead="block"``): none of its jobs runs
    until a person retries or discards the dead one (``App.blocked_keys``)."""

    key: str
    dead_job_id: int
    """The oldest dead job holding it: retry it (or discard it) to let the key go on."""
    waiting: int
    """Its live jobs waiting behind it."""
    database: str = "default"
    """The database this row is of (an App with ``databases=`` has several)."""


HOLD_KINDS = ("lock", "horizon", "wal")
"""What can hold the storage's upkeep back: ``lock``, a session holding a lock on the live
jobs' segment due to be cleared (PostgreSQL's rotation cannot take it); ``horizon``, a
transaction, replication slot or prepared transaction holding the MVCC horizon (PostgreSQL's
vacuum of the live jobs cannot remove what died after it); ``wal``, a reader's open
transaction keeping SQLite's write-ahead log from being checkpointed (the ``-wal`` file
grows)."""


@dataclass(frozen=True, slots=True)
class StorageHolder:
    """Who holds the storage's upkeep back (``StorageHold.holders``): a PostgreSQL session, a
    replication slot or a prepared transaction. What ``pg_stat_activity``,
    ``pg_replication_slots`` and ``pg_prepared_xacts`` say of it when it was read; a field
    the holder's kind has no such thing for is None."""

    kind: str
    """``session``, ``replication slot`` or ``prepared transaction``."""
    pid: int | None
    """A session's backend pid (a slot's: its walsender's, while one is connected)."""
    name: str
    """A session's ``application_name``, a slot's name, a prepared transaction's gid."""
    state: str | None
    """A session's state (``idle in transaction``, ``active``...); a slot's ``active`` or
    ``inactive``; ``prepared``."""
    backend_start: datetime | None
    xact_start: datetime | None
    """When its transaction began (a prepared transaction: when it was prepared)."""
    query_start: datetime | None
    """When its last statement began."""
    xact_age_s: float | None
    """How long its transaction has been open, in seconds (None: a slot, which has none)."""
    xmin_age: int | None
    """How many transactions back it holds the horizon (the horizon's holders)."""
    query: str
    """Its last statement, whitespace runs made one space, cut to at most 200 characters
    (``""``: none). Shown to a person with its control characters escaped."""
    relations: tuple[str, ...] = ()
    """The lock's holders: which of the relations asked about it holds a lock on."""

    @property
    def identity(self) -> tuple[object, ...]:
        """What tells this holder from the next one: a pid is reused, a backend's start and
        its transaction's are not."""
        if self.kind == "session":
            return (self.kind, self.pid, self.backend_start, self.xact_start)
        return (self.kind, self.name, self.xact_start)


@dataclass(frozen=True, slots=True)
class StorageHold:
    """The storage's upkeep held back now, one kind of hold (``HOLD_KINDS``), and by whom:
    ``Stats.storage``, a worker's log lines and its ``skiplock_storage_held_*`` gauges."""

    hold: str
    """``lock``, ``horizon`` or ``wal``."""
    holders: tuple[StorageHolder, ...] = ()
    """Oldest first (empty for ``wal``: SQLite cannot say which connection holds it)."""
    held_s: float | None = None
    """How long it has been held, in seconds, as far as the reader can tell: a statistics
    reading gives the oldest holder's transaction age (None: a slot's, or SQLite's, which
    only the worker that saw it begin knows)."""
    dead_versions: int | None = None
    """What it costs on PostgreSQL: the dead row versions waiting in the held segments
    (``lock``) or in the live jobs' partition (``horizon``)."""
    relations: tuple[str, ...] = ()
    """``lock``: the held relations."""
    wal_bytes: int | None = None
    """``wal``: the size of the ``-wal`` file."""
    wal_pending_bytes: int | None = None
    """``wal``: the bytes of it no checkpoint could copy into the database yet."""


class SchemaVersion(NamedTuple):
    """The database's skiplock schema version and the one this skiplock needs."""

    current: int
    """The last migration applied to the database (0: never migrated)."""
    latest: int
    """The last migration this skiplock knows: ``current == latest`` is ready to work."""


@dataclass(frozen=True, slots=True)
class DeadGroup:
    """Dead jobs of one task whose last error had one message: what a person triages."""

    task: str
    error: str
    """The last recorded error's message ('' if the job has none)."""
    count: int
    last_id: int
    """The newest job of the group (to open as an example)."""
    last_at: datetime | None
    """When the newest of them died."""
    database: str = "default"
    """The database this row is of (an App with ``databases=`` has several)."""


@dataclass(frozen=True, slots=True)
class CronRun:
    """A schedule's most recent slot and the job it enqueued."""

    schedule: str
    slot: datetime
    job_id: int | None
    """None when the slot was skipped (its previous run still live, no overlap allowed)."""
    database: str = "default"
    """The database this row is of (an App with ``databases=`` has several)."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One person action in the audit trail (``app.audit_trail()``): who did what, to what."""

    id: int
    at: datetime
    who: str
    what: str
    """``pause queue``, ``set queue limits``, ``prune``, ``retry``, ``sign-in refused``..."""
    target: str
    """What it acted on: ``queue payments``, ``job 42``, ``dead jobs``, a client address."""
    detail: str
    """The rest: the limits set, how many rows, why it was refused."""
    database: str = "default"
    """The database this row is of (an App with ``databases=`` has several)."""


@dataclass(frozen=True, slots=True)
class TaskPause:
    task: str
    until: datetime | None
    """None: until a person resumes it. A time: the breaker's cool-down end."""
    reason: str
    database: str = "default"
    """The database the pause is in: a person's is written to every database of the App,
    the breaker's to the database whose worker tripped it."""


@dataclass(frozen=True, slots=True)
class ChildProcess:
    """One child process of a worker's process tasks, as its worker's last beat saw it."""

    pid: int
    jobs: int
    """Jobs it ran to their end so far (it is replaced at ``max_tasks_per_child``)."""
    rss_bytes: int
    """Its resident memory after its last job, as it read it."""


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker in the live-worker registry, as of its last maintenance beat."""

    id: str
    """Unique per worker run (its lease token prefix): ``name:random``."""
    name: str
    host: str
    pid: int
    queues: tuple[str, ...] | None
    """The queues it claims from; None: every queue."""
    concurrency: int
    running: int
    """Jobs it held (claimed or running) at its last beat."""
    processed: int
    """Outcomes it recorded since it started."""
    started_at: datetime
    heartbeat_at: datetime
    last_claim_at: datetime | None
    """When it last claimed a job (None: never)."""
    silent_s: float
    """Seconds since its last beat, by the database clock, when this was read."""
    gone_after_s: float | None = None
    """The silence after which this worker counts as gone (a few of its beats, at least
    10 s); None: a worker from before skiplock recorded it."""
    process: str | None = None
    """Which OS process beat (boot id, pid namespace, pid, start time), so a reader on the
    same machine can tell that process is gone; None where the OS cannot say."""
    restarts: int = 0
    """How often its ``--processes`` supervisor had restarted a crashed worker when it
    started this one."""
    restarts_in_a_row: int = 0
    """Of those, the ones since one of its workers last stayed up a minute (0 once this one
    has): a crash loop when it grows (``skiplock health`` turns red at 3)."""
    database: str = "default"
    """The database whose registry this row is in (an App with ``databases=`` has several)."""
    children: tuple[ChildProcess, ...] = ()
    """The child processes its process tasks ran in at its last beat (``executor="process"``:
    docs/guides/processes.md); none for a worker that runs no process task."""
