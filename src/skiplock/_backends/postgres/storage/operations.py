"""PostgreSQL's storage operations: the prune, the hot vacuum, the rotation of the live
generations, holds, and the history partitions made ahead of time."""

from __future__ import annotations

from datetime import datetime, timedelta

from ...._job import StorageHold
from ...claim_rules import KEY_TURNS_SLICE
from ...params import HotVacuum, JobPruneParams, Rotation, StorageHoldParams, WalCheckpoint
from ..connection import Connection
from ..errors import retry_moved
from ..errors import wrapped as _wrapped
from . import holders, rotation
from . import partitions as storage

MAX_AGE_S = 100 * 365 * 86400.0
"""A retention past which no history partition is dropped (and no date overflows)."""


class StorageOperations(Connection):
    """The storage's upkeep: prune, vacuum, rotation, holds, partitions made ahead."""

    async def job_prune(self, params: JobPruneParams) -> int:
        # Whole history days past the retention go first, by DROP (milliseconds, whatever
        # their size); the batch then deletes the rest of the rule's rows (the straddling day,
        # dead jobs, the default partition), as before.
        with _wrapped("job_prune"):
            async with self.pool.acquire() as conn:
                now: datetime = await conn.fetchval(storage.DB_NOW, self._now())
                dropped = 0
                if params.finished_age_s < MAX_AGE_S:
                    cutoff = now - timedelta(seconds=params.finished_age_s)
                    dropped = await storage.drop_expired(conn, self.schema, cutoff)
                status = await retry_moved(
                    lambda: conn.execute(
                        self._sql.JOB_PRUNE,
                        params.finished_age_s,
                        params.dead_age_s,
                        self._now(),
                        params.batch,
                    )
                )
        return dropped + int(status.split()[-1])

    async def hot_vacuum(self, min_dead: int) -> HotVacuum | None:
        with _wrapped("hot_vacuum"):
            async with self.pool.acquire() as conn:
                done = await storage.vacuum_live(conn, self.schema, min_dead)
        if done is None:
            return None
        before, after, report = done
        if report is None:
            return HotVacuum(before, after)
        if report == storage.SKIPPED:
            return HotVacuum(before, after, skipped=True)
        return HotVacuum(before, after, removed=report[0], kept=report[1])

    async def rotate_live(self, min_bytes: int) -> Rotation | None:
        with _wrapped("rotate_live"):
            async with self.pool.acquire() as conn:
                return await rotation.rotate_live(conn, self.schema, min_bytes, self.channel)

    async def storage_hold(self, params: StorageHoldParams) -> StorageHold | None:
        if params.hold not in ("lock", "horizon"):
            return None
        with _wrapped("storage_hold"):
            async with self.pool.acquire() as conn:
                if params.hold == "lock":
                    names = list(params.relations) or await holders.rotation_relations(
                        conn, self.schema
                    )
                    return await holders.lock_holders(conn, names, params.min_age_s)
                live = f'"{self.schema}".skiplock_jobs_live'
                return await holders.horizon_holders(conn, live, params.min_age_s)

    async def wal_checkpoint(self, truncate_above: int) -> WalCheckpoint | None:
        return None  # the server keeps its own write-ahead log

    async def storage_upkeep(self) -> list[str]:
        made = await self._make_ahead("storage_upkeep", analyze=True)
        with _wrapped("storage_upkeep"):  # a slice of the key turns, those of idle keys go
            self._turns_after = await self.pool.fetchval(
                self._sql.KEY_TURNS_PRUNE, self._turns_after, KEY_TURNS_SLICE
            )
        return made

    async def _make_ahead(self, operation: str, *, analyze: bool) -> list[str]:
        """The history partitions of today and the next days, by the database's clock."""
        with _wrapped(operation):
            async with self.pool.acquire() as conn:
                now: datetime = await conn.fetchval(storage.DB_NOW, self._now())
                return await storage.make_ahead(conn, self.schema, now, analyze=analyze)

    async def job_prune_preview(self, params: JobPruneParams) -> dict[str, int]:
        with _wrapped("job_prune_preview"):
            rows = await self.pool.fetch(
                self._sql.JOB_PRUNE_PREVIEW, params.finished_age_s, params.dead_age_s, self._now()
            )
        return {r["state"]: int(r["n"]) for r in rows}
