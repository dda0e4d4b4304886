"""SQLite's inserts: a batch as multi-row VALUES, one job without a unique key as one statement
(rows.py builds the arguments), cron slots and Django's imports."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from ..._job import NewJob
from ...errors import QueueFull
from .. import flows
from ..params import (
    CronSlotsPruneSyncParams,
    CronSlotSyncParams,
    JobImportOutcomeParams,
    JobInsertManyParams,
)
from ..sql_files import fill, repeat
from ..unique_keys import KeyId, key_id, map_inserted, unique_scope
from . import unique
from .connection import Connected
from .connection import identity as _identity
from .connection import immediate as _immediate
from .connection import own_sqlite as _own_sqlite
from .errors import wrapped as _wrapped
from .statements import STATEMENTS as sql
from .storage.ids import JOBS, may_roll_back, runs_alone

JOB_INSERT_ROWS_MAX = 999 // 20
"""Rows a statement: 20 values each, within the 999 parameters older SQLite builds allow."""


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
    conn.execute(sql.ID_FLOOR_RAISE, {"name": JOBS})  # past ids a rollback took back
    if any(j.unique_key for j in jobs):
        return _insert_unique(conn, jobs, now)
    step = JOB_INSERT_ROWS_MAX
    last: int | None = None
    for start in range(0, len(jobs), step):
        chunk = jobs[start : start + step]
        values = [v for j in chunk for v in _values(j, now)]
        rows = repeat(sql.JOB_INSERT_ROW, len(chunk), ", ")
        statement = fill(sql.JOB_INSERT_ROWS, n=str(len(chunk)), rows=rows)
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
        j.lane,
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
        "lane": j.lane,
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


def _insert(conn: sqlite3.Connection, jobs: Sequence[NewJob], now: float) -> list[int]:
    """A batch on one of the backend's own connections: one job without a unique key as one
    statement, its own write transaction (``insert_one``); else one BEGIN IMMEDIATE."""
    alone = one_statement(jobs)
    with contextlib.nullcontext(conn) if alone else _immediate(conn):
        return insert_rows(conn, jobs, now)


class Enqueuing(Connected):
    """Inserts, on the database thread or on a caller's own connection."""

    def job_insert_many_here(self, params: JobInsertManyParams) -> list[int]:
        """``job_insert_many`` in the calling thread, in its own write transaction: a sync
        enqueue (``task.enqueue()``) with no event loop and no thread hop. Through the app's
        sync bridge an enqueue crossed two threads (its loop's, then the database thread's),
        three times the cost of the insert itself at ``synchronous=normal``.

        One connection serves every calling thread, one at a time (SQLite takes one writer
        at a time anyway); it is opened at the first call, again in a forked child, and
        closed by ``close_here``. Like every operation it first checks the file is still the
        one it opened."""
        with self._here_lock:
            conn = self._here_conn
            if conn is None or self._here_pid != os.getpid():
                conn = self._here_conn = self._connect()
                self._here_pid, self._here_file = os.getpid(), _identity(self.path)
            self._check_same_file("job_insert_many", self._here_file)
            with _wrapped("job_insert_many"):
                return _insert(conn, params.jobs, self._now())

    async def job_insert_many(self, params: JobInsertManyParams) -> list[int]:
        jobs = params.jobs
        if not jobs:
            return []
        if params.connection is not None:
            return self.job_insert_many_sync(params)

        def insert(conn: sqlite3.Connection) -> list[int]:
            return _insert(conn, jobs, self._now())

        return await self._run("job_insert_many", insert)

    def job_insert_many_sync(self, params: JobInsertManyParams) -> list[int]:
        jobs, connection = params.jobs, _own_sqlite(params.connection)
        with _wrapped("job_insert_many"):
            self._ids.register(connection)
            if runs_alone(connection) and not one_statement(jobs):
                with _immediate(connection):  # raise the counter and insert under one lock
                    return insert_rows(connection, jobs, self._now())
            ids = insert_rows(connection, jobs, self._now())
            if ids and may_roll_back(connection):  # kept before an id is returned (storage/ids.py)
                self._ids.mark(JOBS, max(ids))
            return ids

    def cron_slot_claim_sync(self, params: CronSlotSyncParams) -> bool:
        conn = _own_sqlite(params.connection)
        slot = params.slot.timestamp()
        with _wrapped("cron_slot_claim"):
            created = params.created.timestamp() if params.created else None
            args = {"schedule": params.schedule, "slot": slot, "created": created}
            if not conn.execute(sql.CRON_SLOT_INSERT_AT, {**args, "now": self._now()}).rowcount:
                return False
        job_id = params.enqueue()  # its errors are the caller's (a Django backend's)
        with _wrapped("cron_slot_claim"):
            args = {"schedule": params.schedule, "slot": slot, "job_id": job_id, "skipped": 0}
            conn.execute(sql.CRON_SLOT_SET_OUTCOME, args)
        return True

    def cron_slots_prune_sync(self, params: CronSlotsPruneSyncParams) -> int:
        conn = _own_sqlite(params.connection)
        args = {"before": params.before.timestamp()}
        with _wrapped("cron_slots_prune"):
            return conn.execute(sql.CRON_SLOTS_PRUNE, args).rowcount

    def job_import_outcome_sync(self, params: JobImportOutcomeParams) -> bool:
        conn = _own_sqlite(params.connection)
        args = {
            "id": params.job_id,
            "state": params.state,
            "attempt": params.attempt,
            "created_at": params.created_at.timestamp(),
            "attempted_at": params.attempted_at.timestamp() if params.attempted_at else None,
            "finished_at": params.finished_at.timestamp(),
            "result": params.result_json,
            "errors": params.errors_json,
            "locked_by": params.locked_by,
        }
        with _wrapped("job_import_outcome"):
            return bool(conn.execute(sql.JOB_IMPORT_OUTCOME, args).rowcount)
