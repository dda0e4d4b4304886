"""The questions an operator asks of ``App`` to learn whether skiplock keeps up: the health
numbers (``stats``) and the live workers (``workers``). Read-only; every answer comes from the
database, so any process can ask, worker or not."""

from __future__ import annotations

from ._backends import Backend
from ._backends.base import JobStatsParams
from ._limits import check_seconds, check_text
from ._observe.stats import Stats, WorkerInfo, build_stats
from .errors import ConfigurationError

DEFAULT_WINDOW_S = 300.0
"""The health numbers' default window: the last five minutes."""

MAX_WINDOW_S = 30 * 86400.0
"""The longest window a reading takes (30 days): the finished rows it reads grow with it."""


class AppObserve:
    """Mixed into App, which provides the backend."""

    async def backend(self) -> Backend:
        raise NotImplementedError

    async def stats(
        self,
        *,
        queue: str | None = None,
        task: str | None = None,
        window_s: float = DEFAULT_WINDOW_S,
    ) -> Stats:
        """The health numbers now, per queue, per task and in total, over the last
        ``window_s`` seconds (depths are now), optionally of one ``queue`` and/or ``task``.

        One consistent reading (one snapshot, one database now); cheap at any history size:
        every part reads a partial index or the window's range of one.
        """
        window_s = check_seconds("window_s", window_s, minimum=0.0, open_=True)
        if window_s > MAX_WINDOW_S:
            raise ConfigurationError(
                f"window_s={window_s!r}: must be at most {MAX_WINDOW_S:g} seconds (30 days)"
            )
        check_text("queue", queue, optional=True)
        check_text("task", task, optional=True)
        rows = await (await self.backend()).job_stats(JobStatsParams(window_s, queue, task))
        return build_stats(rows, window_s)

    async def workers(self) -> list[WorkerInfo]:
        """Every worker in the live-worker registry (each upserts its row on its maintenance
        beat and removes it when it stops; rows silent for an hour are forgotten), by name."""
        return await (await self.backend()).worker_list()
