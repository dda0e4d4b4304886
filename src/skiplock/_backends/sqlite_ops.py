"""What runs on the SQLite backend's thread inside a transaction it holds: inserts, the
completion's columns, the shared flows' answers, and inspection reads.

``sqlite.py`` owns the connection, the thread and the operations; these are the pieces each
operation composes, kept apart so that module stays the list of operations.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from .._job import ClaimedJob, Completion, JobFilter, JobRecord, NewJob
from .._transitions import transition
from ..errors import QueueFull
from . import flows
from . import sqlite_history as history
from . import sqlite_sql as sql
from . import sqlite_unique as unique
from .claim_rules import AGING_LEVELS
from .job_rows import claimed_jobs, filter_values, job_record
from .params import ClaimParams
from .protocol import MAX_ERRORS_KEPT
from .sqlite_ids import ID_FLOOR_RAISE, JOBS
from .sqlite_support import dt as _dt
from .unique_keys import KeyId, key_id, map_inserted, unique_scope

NOTHING = "SELECT 1 WHERE 0"
"""The claim of an empty list of queues."""

in_queues = functools.lru_cache(maxsize=16)(sql.job_get_available_in_queues)

finish_into = functools.lru_cache(maxsize=16)(sql.job_finish_into)


def one_statement(jobs: Sequence[NewJob]) -> bool:
    """Whether ``insert_rows`` writes ``jobs`` in one statement (``insert_one``), which needs
    no transaction around it: one job without a unique key."""
    return len(jobs) == 1 and not jobs[0].unique_key


def insert_one(conn: sqlite3.Connection, job: NewJob, now: float) -> int:
    """One job without a unique key in one statement (JOB_INSERT_ONE): its queue's bound
    checked and the row written together; its id."""
    cursor = conn.execute(sql.JOB_INSERT_ONE, (*_values(job, now), job.queue))
    if cursor.rowcount != 1 or cursor.lastrowid is None:
        raise QueueFull(f"queue {job.queue!r} is at its max_depth: nothing was enqueued")
    return cursor.lastrowid


def insert_rows(conn: sqlite3.Connection, jobs: Sequence[NewJob], now: float) -> list[int]:
    """Insert a batch on ``conn`` inside whatever transaction it is in; ids in input order.

    Bounded queues are checked first (all or nothing: QueueFull before any row is written).
    Without unique keys, AUTOINCREMENT inside one write transaction hands out consecutive ids,
    so the last id gives all of them without a round trip per row.
    """
    if one_statement(jobs):
        return [insert_one(conn, jobs[0], now)]
    for queue in sorted({j.queue for j in jobs}):
        bound = conn.execute(sql.QUEUE_DEPTH_LIMIT, {"queue": queue}).fetchone()
        wanted = sum(1 for j in jobs if j.queue == queue)
        if bound is not None and bound[1] + wanted > bound[0]:
            raise QueueFull(f"queue {queue!r} is at its max_depth: nothing was enqueued")
    conn.execute(ID_FLOOR_RAISE, {"name": JOBS})  # past ids a rollback took back
    if any(j.unique_key for j in jobs):
        return _insert_unique(conn, jobs, now)
    step = sql.JOB_INSERT_ROWS_MAX
    last: int | None = None
    for start in range(0, len(jobs), step):
        chunk = jobs[start : start + step]
        values = [v for j in chunk for v in _values(j, now)]
        statement = sql.JOB_INSERT_ROWS.format(
            n=len(chunk), rows=", ".join([sql.JOB_INSERT_ROW] * len(chunk))
        )
        last = conn.execute(statement, values).lastrowid  # last_insert_rowid(), no statement
    if last is None:
        last = int(conn.execute(sql.LAST_INSERT_ID).fetchone()[0])
    return list(range(last - len(jobs) + 1, last + 1))


def _values(j: NewJob, now: float) -> tuple[Any, ...]:
    """A job's values in JOB_INSERT_ROW's order."""
    return (
        j.task,
        j.queue,
        j.args_json,
        j.kwargs_json,
        j.priority,
        j.max_attempts,
        j.run_at.timestamp() if j.run_at else now + (j.run_after_s or 0.0),
        j.timeout,
        j.correlation_id,
        now,
        j.lease_s,
        j.unique_key,
        j.unique_succeeded,
        j.trace_context,
        j.payload_version,
        j.concurrency_key,
        j.key_limit,
        j.key_order,
        j.key_weight,
    )


def _row(j: NewJob, now: float) -> dict[str, Any]:
    return {
        "task": j.task,
        "queue": j.queue,
        "args": j.args_json,
        "kwargs": j.kwargs_json,
        "priority": j.priority,
        "max_attempts": j.max_attempts,
        "run_at": j.run_at.timestamp() if j.run_at else now + (j.run_after_s or 0.0),
        "timeout": j.timeout,
        "correlation_id": j.correlation_id,
        "now": now,
        "lease_s": j.lease_s,
        "unique_key": j.unique_key,
        "unique_succeeded": j.unique_succeeded,
        "trace_context": j.trace_context,
        "payload_version": j.payload_version,
        "concurrency_key": j.concurrency_key,
        "key_limit": j.key_limit,
        "key_order": j.key_order,
        "key_weight": j.key_weight,
        "unique_until": None if j.unique_for_s is None else now + j.unique_for_s,
        "unique_scope": unique_scope(j),
    }


def _insert_unique(conn: sqlite3.Connection, jobs: Sequence[NewJob], now: float) -> list[int]:
    """A batch with unique keys, job by job: a key held already maps the job to its holder
    (or raises, or replaces it: ``flows.replace_held``)."""
    inserted: list[tuple[int, KeyId | None]] = []
    live: dict[KeyId, int] = {}
    for job in jobs:
        created = _insert_keyed(conn, job, now)
        key = key_id(job)
        if created is not None:
            inserted.append((created, key))
        elif key is not None and key not in live:
            live[key] = _holder(conn, *key)
    held: list[int] = []
    ids = map_inserted(jobs, inserted, live, held)
    for i in held:
        ids[i] = flows.drive(flows.replace_held(jobs[i], ids[i]), _replace_answer(conn, now))
    return ids


def _replace_answer(conn: sqlite3.Connection, now: float) -> Callable[[object], Any]:
    """``flows.replace_held``'s steps on ``conn``, inside its write transaction (nothing can
    change between them)."""

    def answer(step: object) -> Any:
        if isinstance(step, flows.InsertUnique):
            return _insert_keyed(conn, step.job, now)
        if isinstance(step, flows.HolderOf):
            unique.release_passed(conn, step.key, step.scope, now)
            return _holder_or_none(conn, step.key, step.scope)
        if isinstance(step, flows.ReplacePending):
            row = _row(step.job, now)
            names = ("args", "kwargs", "run_at", "payload_version", "unique_key", "unique_scope")
            args = {"id": step.holder, "task": step.job.task, **{n: row[n] for n in names}}
            return conn.execute(sql.JOB_REPLACE_PENDING, args).rowcount == 1
        if isinstance(step, flows.ReleaseRunning):
            row = _row(step.job, now)
            args = {"id": step.holder, **{n: row[n] for n in ("task", *KEY_COLUMNS)}}
            return conn.execute(sql.JOB_RELEASE_RUNNING_KEY, args).rowcount == 1
        raise TypeError(f"no SQLite answer to {step!r}")

    return answer


KEY_COLUMNS = ("unique_key", "unique_scope")
"""A held key's columns, as the unique index reads them."""


def _insert_keyed(conn: sqlite3.Connection, job: NewJob, now: float) -> int | None:
    """One job with a unique key; None when a job holds the key (a succeeded job whose
    window has passed lets it go first)."""
    row = _row(job, now)
    created = conn.execute(sql.JOB_INSERT_UNIQUE, row).fetchone()
    key = key_id(job)
    if created is None and key is not None and unique.release_passed(conn, *key, now):
        created = conn.execute(sql.JOB_INSERT_UNIQUE, row).fetchone()
    return None if created is None else int(created[0])


def _holder_or_none(conn: sqlite3.Connection, key: str, scope: str) -> int | None:
    row = conn.execute(sql.JOB_HOLDER_OF, {"unique_key": key, "unique_scope": scope}).fetchone()
    return None if row is None else int(row[0])


def _holder(conn: sqlite3.Connection, key: str, scope: str) -> int:
    """The job holding ``key`` in ``scope``, which an insert just found held in this
    transaction."""
    holder = _holder_or_none(conn, key, scope)
    assert holder is not None, key
    return holder


def completion_args(c: Completion, now: float) -> dict[str, Any]:
    """One outcome's columns, as its transition says (the SQL only writes them)."""
    change = transition(c.disposition, c.delay_s)
    return {
        "id": c.job_id,
        "token": c.lease_token,
        "state": change.state.value,
        "attempt_delta": change.attempt_delta,
        "run_at": None if change.run_after_s is None else now + change.run_after_s,
        "finished_at": now if change.finished else None,
        "error": json.dumps(c.error) if c.error is not None else None,
        "max_errors": MAX_ERRORS_KEPT,
        "result": c.result_json,
        "progress": c.progress_json,
        "run_s": c.run_s,
    }


def _keeping(c: Completion) -> bool:
    return c.result_json is not None or c.progress_json is not None


def completion_statement(c: Completion) -> str:
    """The cheaper statement unless the outcome carries a result or progress to store."""
    if _keeping(c):
        return sql.JOB_SET_STATE_KEEPING_RESULT
    return sql.JOB_SET_STATE_IF_RUNNING_MANY


def complete(conn: sqlite3.Connection, completions: Sequence[Completion], now: float) -> list[int]:
    """Write a batch of outcomes inside the caller's write transaction; the ids written.

    A succeeded or cancelled job goes straight into the day's table (sqlite_history.py): its
    row as the outcome leaves it is copied there while it still runs under its token, and
    the copied live rows are deleted in one statement at the end, in the same transaction (a
    row is in one table at every commit). Copying instead of updating first and moving after
    spares the update's rewrite of the row and its index entries. Other outcomes, and a
    success that keeps its unique key, are written in place."""
    applied: list[int] = []
    moved: list[int] = []
    target: tuple[str, tuple[str, ...]] | None = None
    looked = False
    for c in completions:
        args = completion_args(c, now)
        if args["state"] in history.MOVES:
            if not looked:
                target, looked = history.day_target(conn, now), True
            if target and conn.execute(finish_into(*target, _keeping(c)), args).rowcount:
                applied.append(c.job_id)
                moved.append(c.job_id)
                continue
        if conn.execute(completion_statement(c), args).rowcount:
            applied.append(c.job_id)
    if moved:
        conn.execute(sql.JOB_DELETE_MOVED, {"ids": json.dumps(moved)})
    return applied


def claimed(rows: list[Any], *, as_listed: bool = False) -> list[ClaimedJob]:
    return claimed_jobs(rows, _dt, as_listed=as_listed)


class Answers:
    """A flow's steps (flows.py) answered on one connection, inside the caller's transaction."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        now: Callable[[], float],
        claim: Callable[[ClaimParams, str | None], tuple[str, dict[str, Any]]],
        claim_keyed: Callable[[sqlite3.Connection, ClaimParams, bool], list[Any]],
    ) -> None:
        self.conn, self.now, self.claim, self.claim_keyed = conn, now, claim, claim_keyed

    def __call__(self, step: object) -> Any:
        return self.answer(step)

    @functools.singledispatchmethod
    def answer(self, step: object) -> Any:
        raise TypeError(f"no SQLite answer to {step!r}")

    @answer.register
    def _(self, step: flows.LockQueue) -> flows.QueueLimits | None:
        row = self.conn.execute(sql.QUEUE_LOCK, {"queue": step.queue}).fetchone()
        if row is None:
            return None
        limits = (row[0], row[1], bool(row[2]), json.loads(row[3]))
        return flows.QueueLimits(*limits, self.now(), row[4])

    @answer.register
    def _(self, step: flows.CountRunning) -> int:
        return int(self.conn.execute(sql.QUEUE_RUNNING, {"queue": step.queue}).fetchone()[0])

    @answer.register
    def _(self, step: flows.ClaimFromQueue) -> list[Any]:
        statement, args = self.claim(step.params, step.queue)
        if step.aging_s is not None:
            statement = sql.JOB_GET_AVAILABLE_AGED
            args = {**args, "aging": step.aging_s, "levels": AGING_LEVELS}
        return self.conn.execute(statement, {**args, "now": step.now}).fetchall()

    @answer.register
    def _(self, step: flows.ClaimKeyedFromQueue) -> list[Any]:
        params = dataclasses.replace(step.params, queues=(step.queue,))
        return self.claim_keyed(self.conn, params, True)

    @answer.register
    def _(self, step: flows.SetStarts) -> None:
        self.conn.execute(
            sql.QUEUE_STARTS_SET, {"starts": json.dumps(step.starts), "queue": step.queue}
        )

    @answer.register
    def _(self, step: flows.InsertSlot) -> bool:
        args = {"schedule": step.schedule, "slot": step.slot.timestamp(), "now": self.now()}
        return self.conn.execute(sql.CRON_SLOT_INSERT, args).rowcount > 0

    @answer.register
    def _(self, step: flows.PreviousRunLive) -> bool:
        return bool(
            self.conn.execute(sql.CRON_PREVIOUS_RUN_LIVE, {"schedule": step.schedule}).fetchone()[0]
        )

    @answer.register
    def _(self, step: flows.InsertJob) -> int:
        return insert_rows(self.conn, [step.job], self.now())[0]

    @answer.register
    def _(self, step: flows.SetSlotOutcome) -> None:
        args = {
            "job_id": step.job_id,
            "skipped": int(step.skipped),
            "schedule": step.schedule,
            "slot": step.slot.timestamp(),
        }
        self.conn.execute(sql.CRON_SLOT_SET_OUTCOME, args)


def records(conn: sqlite3.Connection, statement: str, args: Any) -> list[JobRecord]:
    """Inspection rows, by column name. Text is read as bytes and decoded by the reader, so a
    value that is not UTF-8 (written by another producer) is shown with a note, not an error;
    only this read pays for it (the connection's thread runs one operation at a time)."""
    conn.text_factory = bytes
    try:
        cursor = conn.execute(statement, args)
        names = [d[0] for d in cursor.description]
        return [job_record(dict(zip(names, row, strict=True))) for row in cursor.fetchall()]
    finally:
        conn.text_factory = str


def filter_params(where: JobFilter) -> dict[str, Any]:
    """A filter as the filtered statements take it: ids as a JSON array, times as seconds."""
    values = filter_values(where)
    if values["ids"] is not None:
        values["ids"] = json.dumps(values["ids"])
    for name in ("since", "until"):
        if values[name] is not None:
            values[name] = values[name].timestamp()
    return values
