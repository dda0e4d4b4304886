"""PostgreSQL's inserts: unnest and COPY on asyncpg, a caller's psycopg connection, cron slots."""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from ..._job import NewJob, SlotOutcome
from ...errors import QueueFull
from .. import flows
from ..params import (
    CronSlotClaimParams,
    CronSlotsPruneSyncParams,
    CronSlotSyncParams,
    JobImportOutcomeParams,
    JobInsertManyParams,
)
from . import rows as ops
from . import statements as sql
from .claim import Claim
from .errors import wrapped as _wrapped
from .rows import COPY_MIN_ROWS
from .unique import Unique

PREPARE_AT_ONCE = 0
"""psycopg's ``prepare_threshold`` while a caller's connection runs a statement prepared on
purpose (``prepare=True`` is ignored while the threshold is None, Django's default)."""


class Enqueue(Unique, Claim):
    """Inserts (unnest, COPY, a caller's psycopg connection) and cron slots."""

    async def job_insert_many(self, params: JobInsertManyParams) -> list[int]:
        jobs, connection = params.jobs, params.connection
        if not jobs:
            return []
        insert, lookup = self._sql.JOB_INSERT_MANY, self._sql.JOB_LIVE_BY_UNIQUE_KEY
        with _wrapped("job_insert_many"):
            if connection is None:
                async with self.pool.acquire() as conn:
                    # one job needs no transaction: each step of a replace stands alone
                    # (and a DuplicateJob wrote nothing); a batch rolls back as one
                    if len(jobs) == 1 and jobs[0].on_duplicate == "replace":
                        return [await self._replace_one(conn, jobs[0])]
                    if len(jobs) == 1 or not any(j.on_duplicate != "return" for j in jobs):
                        return await self._insert_asyncpg(conn, jobs)
                    async with conn.transaction():
                        return await self._insert_asyncpg(conn, jobs)
            if isinstance(connection, asyncpg.Connection | asyncpg.pool.PoolConnectionProxy):
                return await self._insert_asyncpg(connection, jobs)
        values = ops.insert_params(jobs, self.channel, self._now())
        named = {f"p{i}": v for i, v in enumerate(values, 1)}
        cursor = await connection.execute(ops.to_psycopg(insert), named)  # type: ignore[attr-defined]
        rows = await cursor.fetchall()
        keys = ops.missing_keys(jobs, rows)
        live: list[Any] = []
        if keys:
            named = {"p1": keys[0], "p2": keys[1]}
            cursor = await connection.execute(ops.to_psycopg(lookup), named)  # type: ignore[attr-defined]
            live = await cursor.fetchall()
        held: list[int] = []
        ids = ops.finish_insert(jobs, rows, live, held)
        for i in held:
            flow = flows.replace_held(jobs[i], ids[i])
            ids[i] = await flows.drive_async(flow, self._psycopg_answers(connection))
        return ids

    async def _insert_asyncpg(self, conn: Any, jobs: Sequence[NewJob]) -> list[int]:
        if len(jobs) >= COPY_MIN_ROWS and not any(j.unique_key or j.concurrency_key for j in jobs):
            return await self._copy_asyncpg(conn, jobs)
        params = ops.insert_params(jobs, self.channel, self._now())
        rows = [tuple(r) for r in await conn.fetch(self._sql.JOB_INSERT_MANY, *params)]
        keys = ops.missing_keys(jobs, rows)
        live = await conn.fetch(self._sql.JOB_LIVE_BY_UNIQUE_KEY, *keys) if keys else []
        held: list[int] = []
        ids = ops.finish_insert(jobs, rows, [tuple(r) for r in live], held)
        for i in held:
            flow = flows.replace_held(jobs[i], ids[i])
            ids[i] = await flows.drive_async(flow, self._asyncpg_answers(conn))
        return ids

    def _asyncpg_answers(self, conn: Any) -> Callable[[object], Awaitable[Any]]:
        """``flows.replace_held``'s steps on an asyncpg connection, each in a savepoint (or
        alone, outside a transaction): a row a finish moved meanwhile fails the step alone
        (RACE_LOST), which then did nothing."""

        async def answer(step: object) -> Any:
            statement, args, read = ops.replace_step(step, self._sql, self._now(), self.channel)
            rows: list[Any] = []
            with ops.unless_race_lost():
                if not conn.is_in_transaction():  # a statement alone: its failure ends there
                    rows = await conn.fetch(statement, *args)
                else:
                    async with conn.transaction():
                        rows = await conn.fetch(statement, *args)
            return read(rows)

        return answer

    def _psycopg_answers(self, conn: Any) -> Callable[[object], Awaitable[Any]]:
        """``_asyncpg_answers`` on a caller's psycopg async connection."""

        async def answer(step: object) -> Any:
            statement, named, read = ops.psycopg_step(step, self._sql, self._now(), self.channel)
            rows: list[Any] = []
            with ops.unless_race_lost():
                async with conn.transaction():
                    cursor = await conn.execute(statement, named)
                    rows = await cursor.fetchall()
            return read(rows)

        return answer

    def _psycopg_sync_answers(self, conn: Any) -> Callable[[object], Any]:
        """``_psycopg_answers`` on a caller's synchronous psycopg connection."""

        def answer(step: object) -> Any:
            statement, named, read = ops.psycopg_step(step, self._sql, self._now(), self.channel)
            rows: list[Any] = []
            with ops.unless_race_lost(), conn.transaction():
                rows = conn.execute(statement, named).fetchall()
            return read(rows)

        return answer

    async def _copy_asyncpg(
        self, conn: Any, jobs: Sequence[NewJob], waiting: Sequence[bool] = ()
    ) -> list[int]:
        """A large batch by COPY: ids drawn first, since COPY returns none; the jobs
        ``waiting`` flags (a workflow's) written as waiting.

        COPY writes rows about twice as fast as ``INSERT ... SELECT FROM unnest`` (10,000 no-op
        jobs: ~45 ms against ~100 ms here). Its transaction is a savepoint inside the caller's,
        so a full queue or a failed COPY leaves nothing behind, NOTIFY included.
        """
        per_queue = collections.Counter(j.queue for j in jobs)
        async with conn.transaction():
            row = await conn.fetchrow(
                self._sql.JOB_COPY_PREPARE,
                list(per_queue),
                list(per_queue.values()),
                len(jobs),
                self.channel,
                self._now(),
            )
            if row["full"]:
                raise QueueFull(
                    f"queue {', '.join(map(repr, row['full']))} is at its max_depth: "
                    "nothing was enqueued"
                )
            ids: list[int] = row["ids"]
            now: datetime = row["now"]
            records: list[tuple[Any, ...]] = [
                (
                    job_id,
                    j.task,
                    j.queue,
                    j.args_json,
                    j.kwargs_json,
                    j.priority,
                    j.max_attempts,
                    j.run_at or (now + timedelta(seconds=j.run_after_s) if j.run_after_s else now),
                    j.timeout,
                    j.correlation_id,
                    j.lease_s,
                    j.trace_context,
                    j.payload_version,
                    row["segment"],
                    j.lane,
                )
                for job_id, j in zip(ids, jobs, strict=True)
            ]
            columns = sql.COPY_COLUMNS.split()
            if any(waiting):
                columns.append("state")
                states = ("pending", "waiting")
                records = [(*r, states[w]) for r, w in zip(records, waiting, strict=True)]
            await conn.copy_records_to_table(
                "skiplock_jobs", schema_name=self.schema, columns=columns, records=records
            )
        return ids

    def job_insert_many_sync(self, params: JobInsertManyParams) -> list[int]:
        jobs, connection = params.jobs, params.connection
        if not jobs:
            return []
        if connection is None:
            raise TypeError("connection: job_insert_many_sync needs the caller's connection")
        values = ops.insert_params(jobs, self.channel, self._now())
        execute: Callable[..., Any] = connection.execute  # type: ignore[attr-defined]
        rows = self._insert_prepared(connection, values)
        keys = ops.missing_keys(jobs, rows)
        live = []
        if keys:
            lookup = ops.to_psycopg(self._sql.JOB_LIVE_BY_UNIQUE_KEY)
            live = execute(lookup, {"p1": keys[0], "p2": keys[1]}).fetchall()
        held: list[int] = []
        ids = ops.finish_insert(jobs, rows, live, held)
        for i in held:
            flow = flows.replace_held(jobs[i], ids[i])
            ids[i] = flows.drive(flow, self._psycopg_sync_answers(connection))
        return ids

    def _insert_prepared(self, connection: Any, values: list[Any]) -> list[Any]:
        """JOB_INSERT_MANY on a caller's psycopg connection, bound on the server and prepared
        once per session, as skiplock's own sessions run it.

        Django's connections bind on the client (its default cursor) and prepare nothing
        (``prepare_threshold=None``, for PgBouncer's sake), so the server parsed and planned
        this statement at every enqueue: ~1.7 ms of each, 5x django-tasks-db's one-row INSERT.
        Here it is prepared for this one statement (psycopg's threshold is lifted around it and
        put back: the project's other queries keep the project's setting); psycopg forgets it
        at a rollback and prepares it again. Behind a transaction pooler (the URL's
        ``pooler=transaction``) nothing is prepared, as for skiplock's own sessions: a statement
        prepared on one server session is missing on the next. psycopg's ``RawCursor`` takes
        the statement's ``$1`` placeholders as written (a cursor of psycopg's own placeholders
        re-parses a statement this long at every call to convert them)."""
        if self.pooled or not hasattr(connection, "prepare_threshold"):
            named = {f"p{i}": v for i, v in enumerate(values, 1)}
            statement = ops.to_psycopg(self._sql.JOB_INSERT_MANY)
            return list(connection.execute(statement, named).fetchall())
        from psycopg import RawCursor

        threshold = connection.prepare_threshold
        connection.prepare_threshold = PREPARE_AT_ONCE
        try:
            with RawCursor(connection) as cursor:
                cursor.execute(self._sql.JOB_INSERT_MANY, values, prepare=True)
                return cursor.fetchall()
        finally:
            connection.prepare_threshold = threshold

    async def cron_slot_claim(self, params: CronSlotClaimParams) -> tuple[SlotOutcome, int | None]:
        with _wrapped("cron_slot_claim"):
            async with self.pool.acquire() as conn, conn.transaction():
                return await flows.drive_async(flows.cron_slot(params), self._answers(conn))

    def cron_slot_claim_sync(self, params: CronSlotSyncParams) -> bool:
        execute: Callable[..., Any] = params.connection.execute  # type: ignore[attr-defined]
        insert = ops.to_psycopg(self._sql.CRON_SLOT_INSERT_AT)
        claim = {"p1": params.schedule, "p2": params.slot, "p3": params.created}
        if not execute(insert, claim).fetchall():
            return False
        job_id = params.enqueue()
        outcome = ops.to_psycopg(self._sql.CRON_SLOT_SET_OUTCOME)
        execute(outcome, {"p1": params.schedule, "p2": params.slot, "p3": job_id, "p4": False})
        return True

    def cron_slots_prune_sync(self, params: CronSlotsPruneSyncParams) -> int:
        execute: Callable[..., Any] = params.connection.execute  # type: ignore[attr-defined]
        prune = ops.to_psycopg(self._sql.CRON_SLOTS_PRUNE)
        return int(execute(prune, {"p1": params.before}).rowcount)

    def job_import_outcome_sync(self, params: JobImportOutcomeParams) -> bool:
        execute: Callable[..., Any] = params.connection.execute  # type: ignore[attr-defined]
        values = (
            params.job_id,
            params.state,
            params.attempt,
            params.created_at,
            params.attempted_at,
            params.finished_at,
            params.result_json,
            params.errors_json,
            params.locked_by,
        )
        named = {f"p{i}": v for i, v in enumerate(values, 1)}
        return bool(execute(ops.to_psycopg(self._sql.JOB_IMPORT_OUTCOME), named).rowcount)
