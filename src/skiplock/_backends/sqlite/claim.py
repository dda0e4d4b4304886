"""SQLite's claims: the ordinary one (all queues, or a branch per named queue), a limited queue's
(flows.limited_claim), the keyed one (keys.py) and the aged one."""

from __future__ import annotations

import dataclasses
import functools
import json
import sqlite3
from collections.abc import Callable
from typing import Any

from ..._job import ClaimedJob, SlotOutcome
from .. import flows
from ..claim_rules import AGING_LEVELS
from ..params import ClaimParams, CronSlotClaimParams
from ..protocol import NEXT_RUN_PRIORITIES
from . import keys
from . import rows as ops
from .connection import immediate as _immediate
from .enqueue import Enqueuing, insert_rows
from .statements import STATEMENTS as sql
from .statements import job_get_available_in_queues


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


class Claiming(Enqueuing):
    """The claims, under the file's write lock."""

    def _claim(self, params: ClaimParams, queue: str | None) -> tuple[str, dict[str, Any]]:
        """The claim statement and its arguments: all queues, or the named ones."""
        args = {
            "now": self._now(),
            "worker": params.worker,
            "token": params.lease_token,
            "default_lease": params.default_lease,
            "margin": params.lease_margin,
            "limit": params.limit,
            "limited": queue is not None,
            "lane": params.lane,
        }
        queues = [queue] if queue else params.queues
        if queues is None:
            return sql.JOB_GET_AVAILABLE, args
        queues = list(dict.fromkeys(queues))  # a queue named twice would count twice
        if not queues:
            return sql.JOB_GET_NOTHING, {}
        args.update((f"q{i}", name) for i, name in enumerate(queues))
        return job_get_available_in_queues(len(queues)), args

    # The claimed rows become ClaimedJobs on the SQLite thread, after the commit: the event
    # loop's thread is what a drain of short jobs waits on, and this is ~8% of its work there.

    async def job_get_available(self, params: ClaimParams) -> list[ClaimedJob]:
        def claim(conn: sqlite3.Connection) -> list[ClaimedJob]:
            with _immediate(conn):
                statement, args = self._claim(params, None)
                rows = conn.execute(statement, args).fetchall()
            return ops.claimed(rows)

        return await self._run("job_get_available", claim)

    async def job_get_available_limited(self, params: ClaimParams) -> list[ClaimedJob]:
        def claim(conn: sqlite3.Connection) -> list[ClaimedJob]:
            with _immediate(conn):
                rows = flows.drive(flows.limited_claim(params), self._answerer(conn))
            return ops.claimed(rows)

        return await self._run("job_get_available_limited", claim)

    async def job_get_available_keyed(self, params: ClaimParams) -> list[ClaimedJob]:
        def claim(conn: sqlite3.Connection) -> list[ClaimedJob]:
            with _immediate(conn):
                rows = self._claim_keyed(conn, params, False)
            return ops.claimed(rows, as_listed=True)

        return await self._run("job_get_available_keyed", claim)

    def _claim_keyed(
        self, conn: sqlite3.Connection, params: ClaimParams, limited: bool
    ) -> list[Any]:
        """The keyed claim's rows, inside the caller's write transaction (keys.py)."""
        queues = None if params.queues is None else list(dict.fromkeys(params.queues))
        now = self._now()
        ids = keys.pick(
            conn,
            queues,
            limit=params.limit,
            now=now,
            limited=limited,
            cursors=self._key_cursors,
            lane=params.lane,
        )
        if not ids:
            return []
        args = {
            "ids": json.dumps(ids),
            "now": now,
            "worker": params.worker,
            "token": params.lease_token,
            "default_lease": params.default_lease,
            "margin": params.lease_margin,
            "lane": params.lane,
        }
        rows = conn.execute(sql.JOB_CLAIM_IDS, args).fetchall()
        place = {job_id: n for n, job_id in enumerate(ids)}
        return sorted(rows, key=lambda row: place[row["id"]])  # as the pick took them

    def _answerer(self, conn: sqlite3.Connection) -> Answers:
        return Answers(conn, self._now, self._claim, self._claim_keyed)

    async def queue_limited(self) -> list[str]:
        rows = await self._run("queue_limited", lambda c: c.execute(sql.QUEUE_LIMITED).fetchall())
        return [r[0] for r in rows]

    async def job_next_run_at(self, lookback_s: float = 0.0, lane: str = "default") -> float | None:
        def read(conn: sqlite3.Connection) -> float | None:
            now = self._now()
            since = now - max(lookback_s, 0.0)
            args = {"now": now, "since": since, "most": NEXT_RUN_PRIORITIES, "lane": lane}
            seconds: float | None = conn.execute(sql.JOB_NEXT_RUN_AT, args).fetchone()[0]
            return seconds

        return await self._run("job_next_run_at", read)

    async def job_ready_exists(self, queues: tuple[str, ...] | None, lane: str = "default") -> bool:
        names = None if queues is None else json.dumps(list(queues))

        def read(conn: sqlite3.Connection) -> bool:
            args = {"now": self._now(), "queues": names, "limited": False, "lane": lane}
            return bool(conn.execute(sql.JOB_READY_EXISTS, args).fetchone()[0])

        return await self._run("job_ready_exists", read)

    async def warm_up(self) -> None:
        pass  # one connection, opened with the backend; statements compile in microseconds

    async def cron_slot_claim(self, params: CronSlotClaimParams) -> tuple[SlotOutcome, int | None]:
        def claim(conn: sqlite3.Connection) -> tuple[SlotOutcome, int | None]:
            with _immediate(conn):
                return flows.drive(flows.cron_slot(params), self._answerer(conn))

        return await self._run("cron_slot_claim", claim)
