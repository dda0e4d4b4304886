"""PostgreSQL's claims: ordinary, by queues, limited and keyed, on the claim sessions."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..._job import ClaimedJob
from .. import flows
from ..params import ClaimParams
from ..protocol import NEXT_RUN_PRIORITIES
from . import rows as ops
from . import statements as sql
from .connection import Connection
from .errors import retry_moved
from .errors import wrapped as _wrapped
from .statements import RELEASE_CHUNK
from .storage import sight


class Claim(Connection):
    """The claims: ordinary, by queues, limited, keyed; the claim sessions' warm-up."""

    async def job_get_available(self, params: ClaimParams) -> list[ClaimedJob]:
        # All queues: one ordered walk of the pending index; some queues: a walk of each
        # queue's slice of the per-queue index. Both on the sessions that price sorts out (see
        # _connect): the live partition's segments are read by a merge of their ordered index
        # scans, which a plan from lagging statistics would replace by reading a whole queue
        # and sorting it.
        # Named: the claim's text names the live segments it reads (storage/sight.py).
        name = "JOB_GET_AVAILABLE" if params.queues is None else "JOB_GET_AVAILABLE_IN_QUEUES"
        with _wrapped("job_get_available"):
            rows, covered = await self._claim_named(name, params)
            if not covered and len(rows) < params.limit:
                # The rotation moved the pointer past what the claim named: the rest from the
                # segments read again, at once (a job in a new generation waits no poll).
                more = dataclasses.replace(params, limit=params.limit - len(rows))
                rows += (await self._claim_named(name, more))[0]
        return ops.claimed_in_order(rows)

    async def _claim_named(self, name: str, params: ClaimParams) -> tuple[list[Any], bool]:
        """Claim ``name`` naming the live segments now in sight: the rows it claimed, and
        whether the pointer it returned was among the segments it named (if not, they are
        read again before the next claim)."""
        segments = await sight.refresh(self._sight, self.pool, self.schema)
        rows = await self._claim_sorted(sql.named_claim(self.schema, name, segments), params)
        covered = self._sight.covers(rows[0]["pointer"] if rows else None)
        return [r for r in rows if r["id"] is not None], covered

    async def _claim_sorted(self, statement: str, params: ClaimParams) -> list[Any]:
        args = (*self._claim_args(params, None), False, params.lane)
        if not self.pooled:
            pool = self._claim_pool or self.pool
            return await retry_moved(lambda: pool.fetch(statement, *args))

        # Behind a transaction pooler a session setting would leak to whoever gets the server
        # session next, so the claim prices sorts out in its own transaction: BEGIN and SET
        # LOCAL and COMMIT cost three round trips more (benchmarks/HISTORY.md, "Behind PgBouncer").
        async def claim() -> list[Any]:
            async with self.pool.acquire() as conn, conn.transaction():
                await conn.execute(self._sql.SORT_OFF_IN_TRANSACTION)
                rows: list[Any] = await conn.fetch(statement, *args)
                return rows

        return await retry_moved(claim)

    def _claim_args(self, params: ClaimParams, queue: str | None) -> list[Any]:
        queues = [queue] if queue else params.queues
        if queues is not None:
            queues = list(dict.fromkeys(queues))  # a queue named twice would count twice
        return [
            queues,
            params.limit,
            params.worker,
            params.lease_token,
            params.default_lease,
            params.lease_margin,
            self._now(),
        ]

    async def job_get_available_limited(self, params: ClaimParams) -> list[ClaimedJob]:
        # The claim of a limited queue is the queue-restricted claim's statement, so it runs
        # where sorts are priced out too (a plan from lagging statistics read a flooded
        # queue whole and sorted it): on the claim sessions, or behind a pooler with the
        # settings for this transaction alone.
        pool = self._claim_pool  # None behind a pooler

        async def claim() -> list[Any]:
            async with (pool or self.pool).acquire() as conn, conn.transaction():
                if pool is None:
                    await conn.execute(self._sql.SORT_OFF_IN_TRANSACTION)
                flow = flows.limited_claim(params)
                return await flows.drive_async(flow, self._answers(conn))

        with _wrapped("job_get_available_limited"):
            rows = await retry_moved(claim)
        return ops.claimed_in_order(rows)

    async def job_get_available_keyed(self, params: ClaimParams) -> list[ClaimedJob]:
        # One statement, autocommit: its key locks last as long as it does (behind a pooler
        # too). On the ordinary sessions: it sorts a few rows by design (the claim sessions'
        # enable_sort = off made a claim of 16 take 2 s), and its walk keeps to its index
        # by settings of its own (skiplock_key_walk).
        pool = self.pool

        async def claim() -> list[Any]:
            async with pool.acquire() as conn:
                return await ops.claim_keyed(
                    conn, self._sql, self._claim_args, params, False, self._key_cursors
                )

        with _wrapped("job_get_available_keyed"):
            rows = await retry_moved(claim)
        return ops.keyed_in_order(rows)

    async def queue_limited(self) -> list[str]:
        with _wrapped("queue_limited"):
            return [r["name"] for r in await self._retrying.fetch(self._sql.QUEUE_LIMITED)]

    async def job_next_run_at(self, lookback_s: float = 0.0, lane: str = "default") -> float | None:
        with _wrapped("job_next_run_at"):
            sql, most = self._sql.JOB_NEXT_RUN_AT, NEXT_RUN_PRIORITIES
            seconds: float | None = await self.pool.fetchval(
                sql, self._now(), most, max(lookback_s, 0.0), lane
            )
        return seconds

    async def job_ready_exists(self, queues: tuple[str, ...] | None, lane: str = "default") -> bool:
        with _wrapped("job_ready_exists"):
            names = None if queues is None else list(queues)
            found: bool = await self.pool.fetchval(
                self._sql.JOB_READY_EXISTS, names, self._now(), lane
            )
        return found

    def _answers(self, conn: Any) -> ops.Answers:
        return ops.Answers(
            conn, self._sql, self._claim_args, self._now(), self.channel, self._key_cursors
        )

    async def warm_up(self) -> None:
        # Measured at a worker's start: the first claim paid ~10 ms to open the claim session
        # and the first completion ~10 ms to prepare its statement and introspect its array
        # types, inside the first jobs' latency. Run each hot statement once, touching no row,
        # on the claim session, on an outcome session (its own pool where sessions carry
        # settings; and the small batches' one) and on a pooled one (the producer's side
        # queries). One session each: an idle worker holds five with LISTEN,
        # and the heartbeat opens a second outcome session only when it first overlaps a batch.
        nothing = ClaimParams(None, 0, "warm-up", "warm-up", 1.0, 0.0)
        with _wrapped("warm_up"):
            await self._claim_named("JOB_GET_AVAILABLE", nothing)
            async with (self._by_id_pool or self.pool).acquire() as conn:
                await conn.fetch(
                    self._sql.JOB_SET_STATE_IF_RUNNING_MANY,
                    *ops.completion_params([], self._now(), self.done_channel),
                    nothing.lane,
                )
                await conn.fetch(
                    self._sql.JOB_HEARTBEAT_MANY,
                    *([], [], 1.0, 0.0, self._now(), [], [], None, nothing.lane),
                )
            if self._by_id_small_pool is not None:
                async with self._by_id_small_pool.acquire() as conn:
                    await conn.fetch(
                        self._sql.JOB_SET_STATE_AND_RELEASE,
                        *ops.completion_params([], self._now(), self.done_channel),
                        self.channel,
                        RELEASE_CHUNK,
                        nothing.lane,
                    )
            async with self.pool.acquire() as conn:
                await conn.fetch(self._sql.QUEUE_LIMITED)
                await conn.fetch(
                    self._sql.JOB_GET_AVAILABLE_IN_QUEUES,
                    *self._claim_args(dataclasses.replace(nothing, queues=()), None),
                    False,
                    nothing.lane,
                )
