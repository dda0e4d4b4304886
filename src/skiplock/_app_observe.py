"""``Observe``: the questions an operator asks of ``App`` to learn whether skiplock keeps up:
the health numbers (``stats``) and the live workers (``workers``). Read-only; every answer
comes from the database, so any process can ask, worker or not.

A part the App composes, over the backend alone (a worker's gauges read through one too,
without an App). The public methods' documentation is on ``App``, which delegates to these."""

from __future__ import annotations

import dataclasses

from . import _app_merged as merged
from ._app_databases import Databases
from ._backends.params import (
    KEYS_IN_STATS,
    JobBusiestKeysParams,
    JobStatsParams,
    StorageHoldParams,
)
from ._job import HOLD_KINDS, BlockedKey, KeyLoad, WorkerInfo
from ._lanes import DEFAULT, Directory
from ._limits import check_int, check_seconds, check_text
from ._observe.stats import Stats, build_stats
from .errors import ConfigurationError

DEFAULT_WINDOW_S = 300.0
"""The health numbers' default window: the last five minutes."""

MAX_WINDOW_S = 30 * 86400.0
"""The longest window a reading takes (30 days): the finished rows it reads grow with it."""


DEFAULT_KEYS_SHOWN = KEYS_IN_STATS
"""How many concurrency keys ``busiest_keys`` gives by default (as many as a reading holds)."""
MAX_KEYS_SHOWN = 1000


class Observe:
    """The health reads of one app, over its databases (``stats`` reads one; ``workers``
    and the keys every one, or the one named)."""

    def __init__(self, backend: Databases) -> None:
        self.backend = backend

    @property
    def directory(self) -> Directory:
        """The databases read (the metrics' gauges label each when there are several)."""
        return self.backend.directory

    async def stats(
        self,
        *,
        queue: str | None = None,
        task: str | None = None,
        window_s: float = DEFAULT_WINDOW_S,
        database: str = DEFAULT,
    ) -> Stats:
        window_s = check_seconds("window_s", window_s, minimum=0.0, open_=True)
        if window_s > MAX_WINDOW_S:
            raise ConfigurationError(
                f"window_s={window_s!r}: must be at most {MAX_WINDOW_S:g} seconds (30 days)"
            )
        check_text("queue", queue, optional=True)
        check_text("task", task, optional=True)
        self.backend.chosen(database)
        backend = await self.backend(database)
        rows = await backend.job_stats(JobStatsParams(window_s, queue, task))
        holds = [await backend.storage_hold(StorageHoldParams(kind)) for kind in HOLD_KINDS]
        stats = build_stats(rows, window_s, [h for h in holds if h is not None])
        if database == DEFAULT:
            return stats
        return dataclasses.replace(
            stats,
            database=database,
            keys=tuple(dataclasses.replace(k, database=database) for k in stats.keys),
            blocked_keys=tuple(
                dataclasses.replace(k, database=database) for k in stats.blocked_keys
            ),
        )

    async def workers(self, *, database: str | None = None) -> list[WorkerInfo]:
        found: list[WorkerInfo] = []
        for name in self.backend.chosen(database):
            rows = await (await self.backend(name)).worker_list()
            found += [dataclasses.replace(w, database=name) for w in rows]
        return found

    async def blocked_keys(
        self, limit: int = DEFAULT_KEYS_SHOWN, *, database: str | None = None
    ) -> list[BlockedKey]:
        check_int("limit", limit, 1, MAX_KEYS_SHOWN)
        return await merged.blocked_keys(self.backend, limit, database)

    async def busiest_keys(
        self,
        limit: int = DEFAULT_KEYS_SHOWN,
        *,
        queue: str | None = None,
        task: str | None = None,
        database: str | None = None,
    ) -> list[KeyLoad]:
        check_int("limit", limit, 1, MAX_KEYS_SHOWN)
        check_text("queue", queue, optional=True)
        check_text("task", task, optional=True)
        params = JobBusiestKeysParams(limit, queue, task)
        return await merged.busiest_keys(self.backend, params, database)
