"""SQLite's storage upkeep: the day tables made ahead, stale key turns pruned, the WAL's
checkpoints and holds."""

from __future__ import annotations

import sqlite3

from ...._job import StorageHold
from ...params import HotVacuum, Rotation, StorageHoldParams, WalCheckpoint
from .. import keys
from ..connection import BUSY_TIMEOUT_MS, Connected
from ..connection import immediate as _immediate
from . import history, wal


class Storing(Connected):
    """The storage operations (no vacuum, no rotation: SQLite has neither)."""

    async def hot_vacuum(self, min_dead: int) -> HotVacuum | None:
        return None  # a delete or an update here leaves no dead version to collect

    async def rotate_live(self, min_bytes: int) -> Rotation | None:
        return None  # one table, whose deletes leave no dead version behind

    async def storage_hold(self, params: StorageHoldParams) -> StorageHold | None:
        if params.hold != "wal":
            return None  # no lock a rotation needs, no horizon a vacuum waits behind
        return await self._run("storage_hold", lambda c: wal.held(c, self.path))

    async def wal_checkpoint(self, truncate_above: int) -> WalCheckpoint | None:
        def look(conn: sqlite3.Connection) -> WalCheckpoint:
            return wal.checkpoint(conn, self.path, truncate_above, BUSY_TIMEOUT_MS)

        return await self._run("wal_checkpoint", look)

    async def storage_upkeep(self) -> list[str]:
        def make(conn: sqlite3.Connection) -> list[str]:
            # today's day table, so the first finish of a day rarely pays for the DDL (a
            # completion makes it if it is missing: a table is never needed ahead of time)
            with _immediate(conn):
                known = {name for _, name in history.days(conn)}
                made = history.day_target(conn, self._now())  # None: past MAX_DAYS
                self._turns_after = keys.prune_turns(conn, self._turns_after)
                return [] if made is None or made[0] in known else [made[0]]

        return await self._run("storage_upkeep", make)
