"""A straightforward rebuild of the "seed 000 design": the baseline skiplock must beat.

An asyncpg ``jobs`` table; four worker coroutines sharing a pool of 12, each claiming batches
of 20 with one ``UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED)`` and then running
the batch one job at a time, deleting each row on success (``DELETE FROM jobs WHERE id=$1``);
enqueue is an INSERT plus a ``pg_notify`` (two round trips); workers wake on NOTIFY with a 0.2 s
poll backstop; a janitor reclaims stale locks every 0.5 s. The seed's cron scheduler is left
out: it would enqueue extra jobs into the measured runs. The seed named a partial index on
pending rows as the fix for a growing table, so the table has one.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

BATCH, WORKERS, POOL_MAX, POLL_S = 20, 4, 12, 0.2
VISIBILITY = datetime.timedelta(minutes=5)

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id           bigserial PRIMARY KEY,
    kind         text NOT NULL,
    payload      jsonb NOT NULL DEFAULT '{}',
    status       text NOT NULL DEFAULT 'pending',
    run_at       timestamptz NOT NULL DEFAULT now(),
    locked_at    timestamptz,
    locked_by    text,
    attempts     integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL DEFAULT 3,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS jobs_pending_idx ON jobs (run_at, id) WHERE status = 'pending';
"""

CLAIM = """
UPDATE jobs SET status='running', locked_at=now(), locked_by=$2, attempts=attempts+1
 WHERE id IN (SELECT id FROM jobs WHERE status='pending' AND run_at <= now()
              ORDER BY run_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)
 RETURNING id, kind, payload, attempts, max_attempts
"""

RECLAIM = """
UPDATE jobs SET status='pending', locked_by=NULL, locked_at=NULL
 WHERE status='running' AND locked_at < now() - $1::interval RETURNING id
"""

Handler = Callable[[dict[str, Any]], Awaitable[None]]


class SeedQueue:
    """The seed's enqueue and worker service, with a burst mode for draining benchmarks."""

    def __init__(self, dsn: str, handlers: dict[str, Handler]) -> None:
        self.dsn = dsn
        self.handlers = handlers
        self.pool: asyncpg.Pool | None = None
        self.stop = asyncio.Event()
        self.woken = asyncio.Event()
        self.stats = {"done": 0, "retried": 0, "dead": 0, "reclaimed": 0}

    async def open(self) -> None:
        self.pool = await asyncpg.create_pool(self.dsn, min_size=4, max_size=POOL_MAX)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()

    async def install(self) -> None:
        assert self.pool is not None
        await self.pool.execute(SCHEMA)

    async def enqueue(self, kind: str, payload: dict[str, Any]) -> None:
        assert self.pool is not None
        async with self.pool.acquire() as conn:
            await conn.execute(
                "INSERT INTO jobs (kind, payload, run_at, max_attempts)"
                " VALUES ($1, $2, now() + $3, $4)",
                kind,
                json.dumps(payload),
                datetime.timedelta(0),
                3,
            )
            await conn.execute("SELECT pg_notify('jobs', $1)", kind)

    async def _worker(self, name: str, burst: bool) -> None:
        assert self.pool is not None
        while not self.stop.is_set():
            async with self.pool.acquire() as conn:
                rows = await conn.fetch(CLAIM, BATCH, name)
                for row in rows:
                    await self._run_one(conn, row)
            if not rows:
                if burst:
                    return
                self.woken.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(POLL_S):
                        await self.woken.wait()

    async def _run_one(self, conn: Any, row: Any) -> None:
        payload = json.loads(row["payload"])
        try:
            async with asyncio.timeout(30):
                await self.handlers[row["kind"]](payload)
            await conn.execute("DELETE FROM jobs WHERE id=$1", row["id"])
            self.stats["done"] += 1
        except Exception as exc:
            if row["attempts"] >= row["max_attempts"]:
                self.stats["dead"] += 1
                await conn.execute(
                    "UPDATE jobs SET status='dead', last_error=$2 WHERE id=$1", row["id"], str(exc)
                )
            else:
                self.stats["retried"] += 1
                await conn.execute(
                    "UPDATE jobs SET status='pending', locked_by=NULL, locked_at=NULL,"
                    " run_at=now() + $2, last_error=$3 WHERE id=$1",
                    row["id"],
                    datetime.timedelta(seconds=2 ** row["attempts"]),
                    str(exc),
                )

    async def _janitor(self) -> None:
        assert self.pool is not None
        while not self.stop.is_set():
            self.stats["reclaimed"] += len(await self.pool.fetch(RECLAIM, VISIBILITY))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await self.stop.wait()

    async def run(self, *, burst: bool = False) -> None:
        """Work until ``request_stop()``; with ``burst``, until every worker finds nothing."""
        listener = await asyncpg.connect(self.dsn)
        await listener.add_listener("jobs", lambda *_: self.woken.set())
        try:
            async with asyncio.TaskGroup() as tg:
                janitor = tg.create_task(self._janitor())
                workers = [tg.create_task(self._worker(f"w{i}", burst)) for i in range(WORKERS)]
                await asyncio.gather(*workers)
                self.request_stop()
                await janitor
        finally:
            await listener.close()

    def request_stop(self) -> None:
        self.stop.set()
        self.woken.set()
