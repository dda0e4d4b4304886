"""Job rows read by column name, the same for both dialects: claimed jobs in their start
order, inspected records (never failing on an odd row), outcomes, reclaims, dead groups,
counts per state, the worker registry and key loads; a person's filter as the filtered
statements take it; and an outcome batch and a heartbeat's leases by lane.

A dialect selects the columns under these names and says how to read its times; nothing
here speaks SQL or touches a connection.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol, TypeVar

from .._job import (
    DEFAULT_LANE,
    BlockedKey,
    ChildProcess,
    ClaimedJob,
    Completion,
    DeadGroup,
    JobFilter,
    JobOutcome,
    JobRecord,
    JobState,
    KeyLoad,
    ReclaimedJob,
    WorkerInfo,
)
from .params import JobHeartbeatManyParams

T = TypeVar("T")


class Row(Protocol):
    """A result row read by column name (asyncpg's Record, a dict of SQLite's)."""

    def __getitem__(self, name: str, /) -> Any: ...


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
            lane=r["lane"],
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
    " key_limit, key_order, key_weight, lane"
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
        lane=read.text("lane"),
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
        children=_children(r["children"]),
    )


def _children(text: str | None) -> tuple[ChildProcess, ...]:
    """A worker row's children (JSON ``[[pid, jobs, rss_bytes], ...]``); what does not read
    as that is shown as none, never an error (another version may have written it)."""
    if not text:
        return ()
    try:
        return tuple(ChildProcess(int(p), int(j), int(r)) for p, j, r in json.loads(text))
    except (ValueError, TypeError):
        return ()


def blocked_key(row: Sequence[Any]) -> BlockedKey:
    """A JOB_BLOCKED_KEYS row."""
    key, dead_job_id, waiting = row
    return BlockedKey(str(key), int(dead_job_id), int(waiting))


def key_load(row: Sequence[Any]) -> KeyLoad:
    """A JOB_BUSIEST_KEYS row (SQLite's sums come back as ints, or None for no rows)."""
    key, running, ready, pending, limit = row
    return KeyLoad(str(key), int(running or 0), int(ready or 0), int(pending or 0), limit)


def by_lane(completions: Sequence[Completion]) -> dict[str, list[Completion]]:
    """A batch of outcomes by lane, each lane's in the batch's order: a statement writes one
    lane's rows (docs/design.md, "Every job carries a lane"); a batch of one lane is one
    group, the batch itself."""
    first = completions[0].lane if completions else ""
    if all(c.lane == first for c in completions):
        return {first: list(completions)} if completions else {}
    groups: dict[str, list[Completion]] = {}
    for c in completions:
        groups.setdefault(c.lane, []).append(c)
    return groups


def held_by_lane(params: JobHeartbeatManyParams) -> dict[str, list[tuple[int, str]]]:
    """A heartbeat's (id, token) pairs by lane (``params.lanes``; a job not named there is in
    ``default``): one statement a lane."""
    if not params.lanes:
        return {DEFAULT_LANE: list(params.held)}
    groups: dict[str, list[tuple[int, str]]] = {}
    for pair in params.held:
        groups.setdefault(params.lanes.get(pair[0], DEFAULT_LANE), []).append(pair)
    return groups
