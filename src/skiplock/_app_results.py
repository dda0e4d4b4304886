"""``App``'s side of results: rebuilding a handle from an id, waiting for many handles at
once, and the in-process wake-up a worker gives the waiters of its own loop. Kept apart from
``_app.py`` so the App stays about declaring and enqueueing."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from ._backends import Backend
from ._job import JobOutcome
from ._task import JobHandle
from ._waiting import Waiters, unwrap
from .errors import JobNotFound


class AppResults:
    """Mixed into ``App``: one ``Waiters`` registry per event loop."""

    _waiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Waiters]
    eager: bool
    eager_outcomes: dict[int, JobOutcome]

    async def backend(self) -> Backend:
        raise NotImplementedError  # App provides it

    async def job(self, job_id: int) -> JobHandle:
        """A handle for a job enqueued earlier (a web request that comes back with the id);
        JobNotFound if no such job exists."""
        record = await (await self.backend()).job_get(job_id)
        return JobHandle(record.id, record.task, record.queue, self)  # type: ignore[arg-type]

    async def gather(
        self,
        handles: Iterable[JobHandle],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> list[Any]:
        """The results of many jobs, in the handles' order, woken together (one query per
        wake-up, however many handles). The first dead or cancelled job raises JobFailed or
        JobCancelled, unless ``return_exceptions``, which puts the error in its place;
        TimeoutError if they are not all finished in ``timeout`` s (the jobs go on)."""
        ids = [h.id for h in handles]
        outcomes = await self.wait_for_outcomes(ids, timeout)
        results: list[Any] = []
        for job_id in ids:
            try:
                results.append(unwrap(outcomes[job_id]))
            except Exception as exc:
                if not return_exceptions:
                    raise
                results.append(exc)
        return results

    async def wait_for_outcomes(
        self, job_ids: Sequence[int], timeout: float | None = None
    ) -> dict[int, JobOutcome]:
        """Until every job is final: succeeded, dead or cancelled."""
        if timeout is not None and not timeout >= 0:
            raise ValueError(f"timeout={timeout!r}: must be >= 0 seconds, or None")
        if self.eager:  # every job ran at enqueue: nothing to wait for
            return {i: self._eager_outcome(i) for i in job_ids}
        return await (await self._loop_waiters()).outcomes(job_ids, timeout)

    def _eager_outcome(self, job_id: int) -> JobOutcome:
        try:
            return self.eager_outcomes[job_id]
        except KeyError:
            raise JobNotFound(f"no job with id {job_id} ran in eager mode") from None

    async def drain(self, *, queues: Sequence[str] | None = None) -> list[JobOutcome]:
        """Run every ready job in this process until none is left (a burst worker), and
        return the outcome of each job it ran, in the order they were written. For tests."""
        from ._worker.worker import Worker  # the worker imports the app: resolved at call

        chosen = tuple(queues) if queues is not None else None
        worker = Worker(self, queues=chosen, poll_interval_s=0.05)  # type: ignore[arg-type]
        written = worker.signals.flushed.arm()
        await worker.run(burst=True)
        ids = list(dict.fromkeys(i for batch in written.drain() for i in batch))
        found = {o.id: o for o in await (await self.backend()).job_outcome_many(ids)}
        return [found[i] for i in ids if i in found]

    async def _loop_waiters(self) -> Waiters:
        loop = asyncio.get_running_loop()
        waiters = self._waiters.get(loop)
        if waiters is None:
            waiters = self._waiters[loop] = Waiters(await self.backend())
        return waiters

    def note_finished(self, job_ids: Iterable[int]) -> None:
        """A worker on this loop wrote these jobs' final outcomes: wake its waiters directly."""
        try:
            waiters = self._waiters.get(asyncio.get_running_loop())
        except RuntimeError:
            return
        if waiters is not None:
            waiters.hint(job_ids)

    async def _close_waiters(self) -> None:
        waiters = self._waiters.pop(asyncio.get_running_loop(), None)
        if waiters is not None:
            await waiters.close()
