"""Lock order (issue 24): statements that may wait on several job rows take them in one order
(ascending id), so a worker's completion batch and its heartbeat, run at once on the same
running rows given in opposite orders, never deadlock. Before, each deadlock cost a second
(PostgreSQL's deadlock_timeout) and one of the two failed as an outage.

PostgreSQL only: SQLite has one writer at a time, so its statements never hold some rows
while waiting for others.

The deterministic test forces the interleaving that deadlocked: a third session holds the
middle row, so each statement locks its half of the rows in its own order and stops there;
releasing that row leaves two statements that each need what the other holds, unless both
lock in the same order. Without that third session the window is a few hundred microseconds
and a deadlock a matter of luck (the burst test finds one in a few dozen rounds of the old
statements).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import asyncpg
import pytest

from skiplock._backends import Backend
from skiplock._backends.params import (
    JobHeartbeatManyParams,
    JobInsertManyParams,
    JobReclaimWorkerParams,
)
from skiplock._job import Completion, Disposition

from .helpers import claim, migrated_pg, new_job

ROWS = 200


class Rows:
    """A migrated schema's backend and a session of its own to hold a row lock with."""

    def __init__(self, backend: Backend, schema: str, conn: asyncpg.Connection) -> None:
        self.backend, self.schema, self.conn = backend, schema, conn

    async def running(self, token: str) -> list[tuple[int, str]]:
        """ROWS jobs claimed under ``token``: (id, token) in ascending id."""
        await self.backend.job_insert_many(JobInsertManyParams([new_job() for _ in range(ROWS)]))
        jobs = await self.backend.job_get_available(claim(ROWS, token=token))
        assert len(jobs) == ROWS
        return sorted((job.id, job.lease_token) for job in jobs)

    async def hold(self, job_id: int) -> asyncpg.transaction.Transaction:
        """Lock row ``job_id`` from this session until the returned transaction ends."""
        held = self.conn.transaction()
        await held.start()
        sql = f'SELECT 1 FROM "{self.schema}".skiplock_jobs WHERE id = $1 FOR UPDATE'
        await self.conn.execute(sql, job_id)
        return held

    async def waiting(self, n: int) -> None:
        """Until ``n`` sessions wait behind this one's lock, directly or through a row another
        waiting session took first. The wait graph says whose they are (a statement's text
        in pg_stat_activity is cut at 1 kB, before it names the schema), read from pg_locks,
        which is live where pg_stat_activity is one snapshot per transaction."""
        graph = """WITH RECURSIVE behind(pid) AS (
                       SELECT pg_backend_pid()
                       UNION
                       SELECT w.pid FROM (SELECT DISTINCT pid FROM pg_locks WHERE NOT granted) w
                       JOIN behind b ON b.pid = ANY(pg_blocking_pids(w.pid)))
                   SELECT count(*) - 1 FROM behind"""
        async with asyncio.timeout(10):
            while await self.conn.fetchval(graph) < n:
                await asyncio.sleep(0.005)


@pytest.fixture
async def rows(pg_url: str) -> AsyncIterator[Rows]:
    async with migrated_pg(pg_url) as (app, schema, conn):
        yield Rows(await app.backend(), schema, conn)


def beat(held: Sequence[tuple[int, str]]) -> JobHeartbeatManyParams:
    return JobHeartbeatManyParams(held, 60.0, 5.0, started=frozenset(held))


def done(held: Sequence[tuple[int, str]]) -> list[Completion]:
    return [Completion(job_id, token, Disposition.SUCCEED) for job_id, token in held]


async def test_completion_and_heartbeat_held_at_the_middle_row_do_not_deadlock(
    rows: Rows,
) -> None:
    """The batch locks in id order and waits at the held row; the heartbeat, given the rows
    in either order, waits for none (SKIP LOCKED): it returns while the batch still waits,
    reporting every row held (their tokens are unchanged), and the batch then writes all."""
    for round_ in range(4):
        held = await rows.running(f"w:{round_}")
        forward, backward = (held, held[::-1]) if round_ % 2 else (held[::-1], held)
        blocker = await rows.hold(held[ROWS // 2][0])
        completing = asyncio.create_task(rows.backend.job_set_state_if_running_many(done(forward)))
        await rows.waiting(1)
        extended = await asyncio.wait_for(rows.backend.job_heartbeat_many(beat(backward)), 10)
        assert not completing.done()
        assert sorted(extended) == held
        await blocker.rollback()
        finished = await completing
        assert sorted(finished) == [job_id for job_id, _ in held]


async def test_a_burst_of_opposite_orders_never_deadlocks(rows: Rows) -> None:
    for round_ in range(25):
        held = await rows.running(f"b:{round_}")
        finished, _ = await asyncio.gather(
            rows.backend.job_set_state_if_running_many(done(held)),
            rows.backend.job_heartbeat_many(beat(held[::-1])),
        )
        assert len(finished) == ROWS


async def test_a_supervisor_release_and_a_heartbeat_do_not_deadlock(rows: Rows) -> None:
    """JOB_RECLAIM_WORKER waits on rows (a heartbeat still in flight from the worker that just
    exited), so it locks in id order; the heartbeat waits on none."""
    held = await rows.running("gone:1")
    blocker = await rows.hold(held[ROWS // 2][0])
    releasing = asyncio.create_task(rows.backend.job_reclaim_worker(JobReclaimWorkerParams("gone")))
    await rows.waiting(1)
    extended = await asyncio.wait_for(rows.backend.job_heartbeat_many(beat(held[::-1])), 10)
    assert not releasing.done() and sorted(extended) == held
    await blocker.rollback()
    released = await releasing
    assert sorted(released) == [job_id for job_id, _ in held]
