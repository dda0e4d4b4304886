"""Frees what dead workers held, found through the live-worker registry.

A worker killed without a word (SIGKILL, the OOM killer, a lost machine) leaves its leases
to expire: a task with a 300 s timeout is leased for 330 s, and a frozen or dead worker's job
waited that long. Its registry row says sooner that it is gone (``_observe.liveness``): past
its own silence limit (a few of its beats, at least 10 s), or, read on the same machine, its
process gone. Every worker's rescuer looks at start (so a worker restarted on the same host
takes over at once) and on every maintenance beat; for each dead row it returns the leases
under that worker's id to pending (``job_reclaim_worker``: the attempt stays spent, fencing
unchanged) and deletes the row. A live worker's leases are never shortened: it beats, so its
row is never judged dead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .._backends import Backend
from .._backends.params import JobReclaimWorkerParams
from .._job import ReclaimedJob
from .._observe.liveness import dead_reason

log = logging.getLogger("skiplock.worker")


class DeadWorkers:
    """One look at the registry: ``await sweep()`` frees every dead worker's leases."""

    def __init__(
        self,
        backend: Backend,
        me: str,
        name: str,
        answered_for_s: Callable[[], float],
    ) -> None:
        """``me``: this worker's id (never judged); ``name``: how the jobs' errors name it;
        ``answered_for_s()``: how long the database has answered its beats without a break
        (``Presence.answered_for_s``)."""
        self.backend = backend
        self.me = me
        self.name = name
        self.answered_for_s = answered_for_s

    async def sweep(self, into: list[ReclaimedJob] | None = None) -> list[int]:
        """Reclaim the leases of every dead worker in the registry and forget its row; the
        job ids returned to pending (or dead, attempts spent), with details into ``into``.
        BackendUnavailable passes through."""
        released: list[int] = []
        answered = self.answered_for_s()
        for worker in await self.backend.worker_list():
            why = None if worker.id == self.me else dead_reason(worker, answered)
            if why is None:
                continue
            ids = [
                job_id
                for lane in self.backend.lanes
                for job_id in await self.backend.job_reclaim_worker(
                    JobReclaimWorkerParams(
                        worker.id, into, f"{why}; reclaimed by worker {self.name}", lane
                    )
                )
            ]
            await self.backend.worker_delete(worker.id)
            released += ids
            if ids:
                log.warning(
                    "worker %s (%s, pid %d) %s: returned its %d leased jobs at once: %s",
                    worker.name,
                    worker.host,
                    worker.pid,
                    why,
                    len(ids),
                    ids[:20],
                )
            else:
                log.info("worker %s (%s, pid %d) %s", worker.name, worker.host, worker.pid, why)
        return released
