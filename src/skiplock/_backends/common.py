"""The algorithms both dialects run, written once: the SQL modules only say how to store.

A backend module binds these to its driver; nothing here speaks SQL or touches a connection.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol, TypeVar

from .._job import (
    BlockedKey,
    ClaimedJob,
    DeadGroup,
    JobFilter,
    JobOutcome,
    JobRecord,
    JobState,
    KeyLoad,
    NewJob,
    ReclaimedJob,
    WorkerInfo,
)
from .._workflow_records import (
    BatchInfo,
    GraphNode,
    JobLinks,
    LinkedJob,
    SignalOutcome,
    SignalReceipt,
    StoredSignal,
    WaitingJob,
    WorkflowGraph,
)
from ..errors import DuplicateJob, MailboxFull

T = TypeVar("T")


TURN = "CASE WHEN wt = 0 THEN 0 ELSE (rank - 1) / coalesce(wt, 1) END"
"""The turn a key's job of ``rank`` (1 first) was claimed in by the keyed claims of
PostgreSQL's migrations 13 and 16 and SQLite's 12 and 15, within one claim's batch (their
text stays as applied); since PostgreSQL's 18 and SQLite's 17 the turns are kept in the
database (``TURN_UNITS``)."""

TURN_UNITS = 720_720
"""A key's pass (``skiplock_key_turns``) advances by ``TURN_UNITS / key_weight`` for each job a
claim takes of it; a job's turn is its key's pass at that job divided by ``TURN_UNITS``.
720,720 is the least common multiple of 1 to 16, so the common weights divide it exactly (a
weight that does not takes its turns a rounding's worth faster: under one job in 700)."""


class Row(Protocol):
    """A result row read by column name (asyncpg's Record, a dict of SQLite's)."""

    def __getitem__(self, name: str, /) -> Any: ...


AGING_LEVELS = 16
"""Distinct priorities an aged claim reads from each end of its queue (so at most 32 index
probes, each for at most the claim's batch of rows): postgres_aging_sql.py."""


def rate_window(rate_per_s: float) -> tuple[int, float]:
    """A rate as (starts, window seconds): ``ceil(rate)`` starts in any ``ceil(rate) / rate``.

    The count is whole and at least one, and the window is chosen so that count / window is
    the rate exactly: 0.5/s is one start in any 2 s, 2.9/s three in any 1.034 s, and a whole
    rate N keeps N in any one second. No window of any length ever holds more than
    ``ceil(rate)`` starts more than the rate allows over it.
    """
    starts = max(1, math.ceil(rate_per_s))
    return starts, starts / rate_per_s


def allowed_starts(
    limit: int,
    max_running: int | None,
    running: int,
    rate_per_s: float | None,
    recent_starts: Sequence[float],
    now: float,
) -> tuple[int, list[float]]:
    """How many jobs a limited queue may start now, and its starts within the rate's window.

    ``max_running`` bounds jobs running at once; ``rate_per_s`` bounds starts in any window
    of ``rate_window`` (a sliding window over the recorded start times, so it is never
    exceeded, and it never lets through more than the window's count: not a token bucket).
    """
    allowed = limit
    if max_running is not None:
        allowed = min(allowed, max_running - running)
    if rate_per_s is None:
        return max(0, allowed), []
    starts, window = rate_window(rate_per_s)
    recent = [t for t in recent_starts if t > now - window]
    return max(0, min(allowed, starts - len(recent))), recent


SHARED_SCOPE = ""
"""The ``unique_scope`` column of a key in the shared key space (``unique_scope="shared"``);
a key of a task's own holds the task's name there, which is never empty."""

KeyId = tuple[str, str]
"""A held key as the unique index knows it: (unique_key, unique_scope)."""


def unique_scope(job: NewJob) -> str | None:
    """The key space ``job``'s unique key is unique in: its task's name, SHARED_SCOPE, or
    None when it has no key."""
    if job.unique_key is None:
        return None
    return SHARED_SCOPE if job.unique_shared else job.task


def key_id(job: NewJob) -> KeyId | None:
    """``job``'s key as the unique index knows it; None when it has none."""
    if job.unique_key is None:
        return None
    return job.unique_key, SHARED_SCOPE if job.unique_shared else job.task


def map_inserted(
    jobs: Sequence[NewJob],
    inserted: Sequence[tuple[int, KeyId | None]],
    live: dict[KeyId, int],
    held: list[int] | None = None,
) -> list[int]:
    """Input order ids from the rows an insert created (in id order) and the live jobs that
    already held some unique keys (by key and scope); raises DuplicateJob where a job asked
    for that. A job that asked to ``replace`` its key's holder maps to it here, and its
    position goes to ``held`` (the holder is a job before the batch, or an earlier one of
    it)."""
    plain = iter([job_id for job_id, key in inserted if key is None])
    created = {key: job_id for job_id, key in inserted if key is not None}
    ids: list[int] = []
    for job in jobs:
        key = key_id(job)
        if key is None:
            ids.append(next(plain))
        elif key in created:
            ids.append(created.pop(key))
            live[key] = ids[-1]  # a later duplicate in this batch maps to it
        else:
            existing = live[key]
            if job.on_duplicate == "raise":
                raise DuplicateJob(
                    f"job {existing} already holds unique_key {job.unique_key!r}", existing
                )
            if job.on_duplicate == "replace" and held is not None:
                held.append(len(ids))
            ids.append(existing)
    return ids


def state_counts(rows: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Jobs per state, every state present; ``claimed`` (running in the row, not reported
    started: claimed ahead) apart from ``running``."""
    counts = {state.value: 0 for state in JobState} | {"claimed": 0}
    counts.update(rows)
    return counts


def queue_state_counts(rows: Iterable[tuple[str, str, int]]) -> dict[str, dict[str, int]]:
    """(queue, state, n) rows as ``state_counts`` per queue: every queue with a job."""
    by_queue: dict[str, list[tuple[str, int]]] = {}
    for queue, state, n in rows:
        by_queue.setdefault(queue, []).append((state, int(n)))
    return {queue: state_counts(counts) for queue, counts in by_queue.items()}


# -- filters -----------------------------------------------------------------------------------


def filter_values(where: JobFilter) -> dict[str, Any]:
    """A person's filter as the filtered statements take it, by name and in their order (ids,
    task, queue, error, since, until, last_error); None means any. Dialects only convert
    types."""
    return {
        "ids": list(where.ids) if where.ids is not None else None,
        "task": where.task,
        "queue": where.queue,
        "error": where.error,
        "since": where.since,
        "until": where.until,
        "last_error": where.last_error,
    }


# -- claimed rows ----------------------------------------------------------------------------


def claimed_jobs(
    rows: Iterable[Row], to_time: Callable[[Any], datetime], *, as_listed: bool = False
) -> list[ClaimedJob]:
    """A claim's rows, read by column name, in the order to start them: priority first, then
    id (UPDATE ... RETURNING keeps no order), or ``as_listed``: the keyed claim lists its jobs
    in its own order (priority, then the key's turn, then age), and a worker that claims
    ahead starts them in that order too. ``to_time`` reads the dialect's times."""
    jobs = [
        ClaimedJob(
            id=r["id"],
            task=r["task"],
            queue=r["queue"],
            args_json=r["args"],
            kwargs_json=r["kwargs"],
            priority=r["priority"],
            attempt=r["attempt"],
            max_attempts=r["max_attempts"],
            timeout=r["timeout"],
            lease_token=r["lease_token"],
            created_at=to_time(r["created_at"]),
            lease_expires_at=to_time(r["lease_expires_at"]),
            lease_s=r["lease_s"],
            correlation_id=r["correlation_id"],
            trace_context=r["trace_context"],
            payload_version=r["payload_version"],
            segment=r["segment"],
            run_at=_run_at(r, to_time),
        )
        for r in rows
    ]
    return jobs if as_listed else in_claim_order(jobs)


def _run_at(row: Row, to_time: Callable[[Any], datetime]) -> datetime | None:
    """A claimed row's ``run_at``; None from the keyed claim's function, which has no such
    column (asyncpg raises KeyError for it, sqlite3 IndexError)."""
    try:
        value = row["run_at"]
    except (KeyError, IndexError):
        return None
    return to_time(value)


def in_claim_order(jobs: list[ClaimedJob]) -> list[ClaimedJob]:
    """Sorted as the runner starts them, in the claims' own order: priority first, then when
    each became due (``run_at``), then id. (By id alone, a job whose ``run_after`` had passed
    started after jobs enqueued since, when the two were claimed together: claimed alone, it
    came first.) A keyed claim's rows carry no ``run_at``; their enqueue time stands in."""
    jobs.sort(key=_claim_rank)
    return jobs


def _claim_rank(job: ClaimedJob) -> tuple[int, datetime, int]:
    return (-job.priority, job.created_at if job.run_at is None else job.run_at, job.id)


def job_outcomes(rows: Iterable[Row]) -> list[JobOutcome]:
    """JOB_OUTCOME_MANY's rows; a last error that is not a JSON object reads as its text."""
    return [
        JobOutcome(r["id"], JobState(r["state"]), r["result"], _error(r["last_error"]))
        for r in rows
    ]


def _error(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"message": text}


# -- job rows, read by column name --------------------------------------------------------------

RECORD_COLUMNS = (
    "id, task, queue, state, args, kwargs, priority, attempt, max_attempts, run_at, created_at,"
    " attempted_at, finished_at, locked_by, lease_expires_at, errors, correlation_id, audit,"
    " started_at, result, progress, payload_version, unique_key, unique_until, concurrency_key,"
    " key_limit, key_order, key_weight"
)
"""The columns of an inspection read. Each dialect selects them under these names, times as
Unix seconds (PostgreSQL: exact numeric) and JSON as text, so one reader maps both."""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FAR_FUTURE = datetime.max.replace(tzinfo=UTC)
FAR_PAST = datetime.min.replace(tzinfo=UTC)


def from_seconds(seconds: float | Decimal) -> datetime:
    """Unix seconds as a UTC time; PostgreSQL's exact numeric seconds keep every microsecond."""
    if isinstance(seconds, Decimal):
        if not seconds.is_finite():
            raise OverflowError(f"{seconds} seconds")
        return EPOCH + timedelta(microseconds=int(seconds * 1_000_000))
    return datetime.fromtimestamp(seconds, UTC)


def _started_at(
    reported: datetime | None, attempted_at: datetime | None, state: JobState
) -> datetime | None:
    """When the latest attempt's code started, as its worker's heartbeat reported it; a job
    that finished before its first heartbeat shows its claim time, the nearest the row knows
    (a running one stays None until reported: that is what tells ``claimed`` apart)."""
    if reported is None and state in JobState.final():
        return attempted_at
    return reported


def job_record(row: Row) -> JobRecord:
    """A job row for people. Reads never fail on an odd row (another producer's run_at beyond
    year 9999, text that is not UTF-8 or not JSON, JSON nested too deep to decode): what cannot
    be read is shown as near as it can be and noted in ``problems``."""
    read = _Reader(row)
    state = JobState(read.text("state"))
    attempted_at = read.time("attempted_at")
    return JobRecord(
        id=row["id"],
        task=read.text("task"),
        queue=read.text("queue"),
        state=state,
        args=read.json("args", []),
        kwargs=read.json("kwargs", {}),
        priority=row["priority"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        run_at=read.time("run_at") or FAR_PAST,
        created_at=read.time("created_at") or FAR_PAST,
        attempted_at=attempted_at,
        finished_at=read.time("finished_at"),
        locked_by=read.text_or_none("locked_by"),
        lease_expires_at=read.time("lease_expires_at"),
        errors=iso_times(read.json("errors", [])),
        correlation_id=read.text_or_none("correlation_id"),
        audit=iso_times(read.json("audit", [])),
        started_at=_started_at(read.time("started_at"), attempted_at, state),
        result=read.any_json("result"),
        progress=read.object_or_none("progress"),
        payload_version=row["payload_version"] or 1,
        unique_key=read.text_or_none("unique_key"),
        unique_until=read.time("unique_until"),
        concurrency_key=read.text_or_none("concurrency_key"),
        key_limit=row["key_limit"],
        key_order=read.text_or_none("key_order"),
        key_weight=row["key_weight"],
        problems=read.problems,
    )


def dead_group(row: Row) -> DeadGroup:
    """A JOB_DEAD_GROUPS row (``task, error, n, last_id, last_at`` as Unix seconds)."""
    last_at = row["last_at"]
    error = row["error"]
    return DeadGroup(
        task=str(row["task"]),
        error=error.decode(errors="replace") if isinstance(error, bytes) else str(error),
        count=int(row["n"]),
        last_id=int(row["last_id"]),
        last_at=None if last_at is None else from_seconds(last_at),
    )


def iso_times(entries: list[Any]) -> list[Any]:
    """Each entry's ``at`` as ISO 8601 in UTC with its offset, whoever wrote it: PostgreSQL's
    jsonb keeps a timestamptz as text in the session's zone, SQLite's entries hold Unix
    seconds, the worker writes Python's isoformat. An ``at`` neither could write stays."""
    for entry in entries:
        if isinstance(entry, dict) and "at" in entry:
            entry["at"] = _iso(entry["at"])
    return entries


def _iso(at: object) -> object:
    try:
        if isinstance(at, int | float) and not isinstance(at, bool):
            return from_seconds(at).isoformat()
        if isinstance(at, str):
            return datetime.fromisoformat(at).astimezone(UTC).isoformat()
    except (OverflowError, ValueError, OSError):
        pass
    return at


class _Reader:
    """Reads one row's columns, noting each that is not what skiplock writes."""

    def __init__(self, row: Row) -> None:
        self.row = row
        self.problems: list[str] = []

    def text_or_none(self, name: str) -> str | None:
        return None if self.row[name] is None else self.text(name)

    def text(self, name: str) -> str:
        value = self.row[name]
        if not isinstance(value, bytes):
            return str(value)
        try:
            return value.decode()
        except UnicodeDecodeError:
            self.problems.append(f"{name}: not valid UTF-8")
            return value.decode(errors="replace")

    def json(self, name: str, empty: T) -> T:
        text = self.text(name)
        try:
            value = json.loads(text)
        except ValueError:
            self.problems.append(f"{name}: not JSON: {text[:200]!r}")
            return empty
        except RecursionError:  # valid JSON (jsonb takes it) nested past Python's stack
            self.problems.append(f"{name}: nested too deep to decode: {text[:200]!r}")
            return empty
        if type(value) is not type(empty):
            self.problems.append(f"{name}: not a JSON {type(empty).__name__}: {text[:200]!r}")
            return empty
        return value

    def any_json(self, name: str) -> Any:
        """A nullable column of any JSON value (SQL NULL and JSON null both read as None)."""
        if self.row[name] is None:
            return None
        text = self.text(name)
        try:
            return json.loads(text)
        except ValueError:
            self.problems.append(f"{name}: not JSON: {text[:200]!r}")
            return None

    def object_or_none(self, name: str) -> dict[str, Any] | None:
        return None if self.row[name] is None else self.json(name, {})

    def time(self, name: str) -> datetime | None:
        seconds = self.row[name]
        if seconds is None:
            return None
        try:
            return from_seconds(seconds)
        except (OverflowError, ValueError, OSError):
            self.problems.append(f"{name}: {seconds} s is beyond the datetime range")
            return FAR_PAST if seconds < 0 else FAR_FUTURE


def reclaimed_jobs(rows: Iterable[Row]) -> list[ReclaimedJob]:
    """JOB_RECLAIM_EXPIRED's rows, for the reclaim's log events."""
    return [
        ReclaimedJob(
            id=r["id"],
            task=r["task"],
            queue=r["queue"],
            state=JobState(r["state"]),
            attempt=r["attempt"],
            max_attempts=r["max_attempts"],
            correlation_id=r["correlation_id"],
            lost_by=r["locked_by"],
        )
        for r in rows
    ]


# -- the worker registry -------------------------------------------------------------------


def worker_info(r: Row, to_time: Callable[[Any], datetime]) -> WorkerInfo:
    """A WORKER_LIST row (either dialect; ``to_time`` reads its times)."""
    queues = r["queues"]
    return WorkerInfo(
        id=r["id"],
        name=r["name"],
        host=r["host"],
        pid=r["pid"],
        queues=None if queues is None else tuple(json.loads(queues)),
        concurrency=r["concurrency"],
        running=r["running"],
        processed=r["processed"],
        started_at=to_time(r["started_at"]),
        heartbeat_at=to_time(r["heartbeat_at"]),
        last_claim_at=None if r["last_claim_at"] is None else to_time(r["last_claim_at"]),
        silent_s=max(0.0, float(r["silent_s"])),
        gone_after_s=None if r["gone_after_s"] is None else float(r["gone_after_s"]),
        process=r["process"],
        restarts=int(r["restarts"]),
        restarts_in_a_row=int(r["restarts_in_a_row"]),
    )


KeyCursors = dict[tuple[tuple[str, ...] | None, bool], tuple[str, str] | None]
"""Where each keyed claim's walk starts next, per queue set and kind (ordinary, or a limited
queue's), as the claim decided it: one backend's claims of a queue set go round the keys. A
hint, not a guarantee: another process keeps its own, and the turns themselves are in the
database (postgres_key_turns_sql.py); no key's limit or turn depends on it."""

KEY_TURNS_SLICE = 10_000
"""Key turn rows the upkeep reads a call for keys with no live job (a probe each): a million
keys are gone over in a hundred calls, one a prune interval, never all at once."""

KEYS_PER_CLAIM_MIN = 32
KEYS_PER_CLAIM_MAX = 256


def keys_to_visit(limit: int) -> int:
    """How many (queue, key) pairs a keyed claim of ``limit`` jobs visits: twice its limit,
    so keys at their cap or with nothing due leave it room, within [32, 256] (a few probes
    each). Visiting four times the limit, at least 8, measured worse: W12's cold keys started
    later (p50 79 ms against 29-49 on PostgreSQL, 107 against 73 on SQLite) and W14 gained
    nothing (1,047 jobs/s against 1,023-1,145)."""
    return max(KEYS_PER_CLAIM_MIN, min(KEYS_PER_CLAIM_MAX, 2 * limit))


def blocked_key(row: Sequence[Any]) -> BlockedKey:
    """A JOB_BLOCKED_KEYS row."""
    key, dead_job_id, waiting = row
    return BlockedKey(str(key), int(dead_job_id), int(waiting))


def key_load(row: Sequence[Any]) -> KeyLoad:
    """A JOB_BUSIEST_KEYS row (SQLite's sums come back as ints, or None for no rows)."""
    key, running, ready, pending, limit = row
    return KeyLoad(str(key), int(running or 0), int(ready or 0), int(pending or 0), limit)


# -- workflows ---------------------------------------------------------------------------------

FINAL_STATES = frozenset({"succeeded", "cancelled", "dead"})


def signal_taken(job_id: int, name: str, seq: int, wait: Sequence[Any] | None) -> SignalReceipt:
    """The receipt of a signal stored as entry ``seq`` of its name, from the job's wait row
    (signal, entry; None: no row): delivered if the job waits for that entry or an earlier one
    of this name (it runs again now), else kept, naming what it does wait for."""
    waiting_for, entry = (wait[0], int(wait[1])) if wait is not None else (None, 1)
    if waiting_for == name and entry <= seq:
        return SignalReceipt(job_id, name, SignalOutcome.DELIVERED, name)
    return SignalReceipt(job_id, name, SignalOutcome.KEPT, waiting_for)


def mailbox_full(job_id: int, most: int) -> MailboxFull:
    """The refusal of a signal to a job whose mailbox holds ``most`` signals no wait took
    (both backends raise it, in these words)."""
    return MailboxFull(
        f"job {job_id}: its mailbox holds max_signals_kept={most} signals no wait_for took "
        "yet; this one was not kept (send it again once the job has taken some)",
        job_id=job_id,
        most=most,
    )


def stored_signal(kind: str, payload: str | None, sender: str | None, at: Any) -> StoredSignal:
    """A mailbox entry from a row (``at``: a datetime, or SQLite's Unix seconds; None on a
    SQLite row written without one)."""
    when = at if isinstance(at, datetime) or at is None else from_seconds(at)
    return StoredSignal(kind, payload, sender, when)


def gathered_too_large(parents: int, size: int, bound: int, now: float) -> str:
    """The error a chord's body buried for the size of its parents' results keeps (as JSON,
    the shape of ``error_record``; PostgreSQL's CHILDREN_READY writes the same words)."""
    return json.dumps(
        {
            "attempt": 0,
            "at": now,
            "message": f"the list of its {parents} parents' results is {size} bytes, over "
            f"max_payload_bytes ({bound}): it was not run",
            "type": "PayloadTooLarge",
            "traceback": None,
            "worker": None,
        }
    )


def _maybe_time(seconds: float | Decimal | None) -> datetime | None:
    return None if seconds is None else from_seconds(seconds)


def job_links(
    parents: Iterable[Sequence[Any]],
    children: Iterable[Sequence[Any]],
    wait: Sequence[Any] | None,
    batch: int | None,
    parent_counts: Iterable[Sequence[Any]] = (),
) -> JobLinks:
    return JobLinks(
        parents=linked_jobs(parents),
        children=linked_jobs(children),
        batch_id=batch,
        parents_left=None if wait is None else wait[0],
        signal=None if wait is None else wait[1],
        parent_counts={str(r[0]): int(r[1]) for r in parent_counts},
    )


def linked_jobs(rows: Iterable[Sequence[Any]]) -> list[LinkedJob]:
    """Rows (id, state, on_failure) of a job's parents or children."""
    return [LinkedJob(r[0], r[1], r[2]) for r in rows]


def batch_info(row: Sequence[Any]) -> BatchInfo:
    """A batch's counts: its member rows per state, and the members the retention pruned
    (their rows went with their jobs; the batch kept their number) as ``gone``."""
    counts = {str(k): int(v) for k, v in (json.loads(row[5]) if row[5] else {}).items()}
    if pruned := int(row[7] or 0):
        counts["gone"] = counts.get("gone", 0) + pruned
    return BatchInfo(
        id=row[0],
        created_at=from_seconds(row[1]),
        closed_at=_maybe_time(row[2]),
        on_success=row[3],
        on_complete=row[4],
        counts=counts,
        aborted_at=_maybe_time(row[6]),
    )


def waiting_job(row: Sequence[Any]) -> WaitingJob:
    signal = row[4]
    return WaitingJob(
        id=row[0],
        task=row[1],
        queue=row[2],
        parents_left=row[3],
        signal=signal,
        until=_maybe_time(row[5]) if signal is not None else None,
        created_at=from_seconds(row[6]),
    )


def workflow_graph(
    nodes: Iterable[Sequence[Any]], edges: Iterable[Sequence[Any]], truncated: bool
) -> WorkflowGraph:
    made = [GraphNode(r[0], r[1], r[2]) for r in nodes]
    known = {n.id for n in made}
    pairs = [(e[0], e[1]) for e in edges if e[0] in known and e[1] in known]
    return WorkflowGraph(sorted(made, key=lambda n: n.id), sorted(pairs), truncated)
