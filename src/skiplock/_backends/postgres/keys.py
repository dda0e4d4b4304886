"""PostgreSQL's concurrency keys as a person reads them: the busiest and the blocked."""

from __future__ import annotations

from ..._job import BlockedKey, KeyLoad
from ..common import blocked_key, key_load
from .connection import Connection
from .errors import wrapped as _wrapped


class Keys(Connection):
    """Concurrency keys: the busiest and the blocked."""

    async def job_busiest_keys(
        self, limit: int, queue: str | None = None, task: str | None = None
    ) -> list[KeyLoad]:
        with _wrapped("job_busiest_keys"):
            args = (self._now(), queue, task, limit)
            rows = await self.pool.fetch(self._sql.JOB_BUSIEST_KEYS, *args)
        return [key_load(tuple(r)) for r in rows]

    async def job_blocked_keys(self, limit: int) -> list[BlockedKey]:
        with _wrapped("job_blocked_keys"):
            rows = await self.pool.fetch(self._sql.JOB_BLOCKED_KEYS, limit)
        return [blocked_key(tuple(r)) for r in rows]
