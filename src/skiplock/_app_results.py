"""``Results``: rebuilding a handle from an id, waiting for many handles at once, and the
in-process wake-up a worker gives the waiters of its own loop (one ``Waiters`` per loop).

A part the App composes, over the backend, the eager mode (whose jobs ran at enqueue) and
the app the handles it builds call back (``Enqueuing``); it never sees the App itself. The
public methods' documentation is on ``App``, which delegates to these."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from ._app_databases import Databases
from ._eager import EagerMode
from ._job import JobOutcome
from ._lanes import DEFAULT
from ._task import Enqueuing, JobHandle
from ._waiting import Waiters, unwrap


class Results:
    """The result reads of one app; one ``Waiters`` registry per event loop and database
    (a job id is waited for in the database it names)."""

    def __init__(self, backend: Databases, eager: EagerMode, owner: Enqueuing) -> None:
        self.backend = backend
        self._eager = eager
        self._owner = owner
        self._waiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Waiters]] = (
            weakref.WeakKeyDictionary()
        )

    async def job(self, job_id: int) -> JobHandle:
        record = await (await self.backend.of_id(job_id)).job_get(job_id)
        return JobHandle(record.id, record.task, record.queue, self._owner)

    async def gather(
        self,
        handles: Iterable[JobHandle],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> list[Any]:
        listed = list(handles)
        outcomes = await self.wait_for_outcomes([h.id for h in listed], timeout)
        results: list[Any] = []
        for handle in listed:
            try:
                results.append(handle.rebuilt(unwrap(outcomes[handle.id])))
            except Exception as exc:
                if not return_exceptions:
                    raise
                results.append(exc)
        return results

    async def wait_for_outcomes(
        self, job_ids: Sequence[int], timeout: float | None = None
    ) -> dict[int, JobOutcome]:
        if timeout is not None and not timeout >= 0:
            raise ValueError(f"timeout={timeout!r}: must be >= 0 seconds, or None")
        if self._eager.on:  # every job ran at enqueue: nothing to wait for
            return {i: self._eager.outcome(i) for i in job_ids}
        parts = self.backend.split(job_ids)
        if len(parts) <= 1:
            database = next(iter(parts), DEFAULT)
            return await (await self._loop_waiters(database)).outcomes(job_ids, timeout)
        waits = [
            asyncio.ensure_future((await self._loop_waiters(name)).outcomes(ids, timeout))
            for name, ids in parts.items()
        ]
        try:
            waited = await asyncio.gather(*waits)
        except BaseException:  # one database's timeout or error: stop waiting on the others
            for wait in waits:
                wait.cancel()
            raise
        return {job_id: part[job_id] for part in waited for job_id in part}

    async def _loop_waiters(self, database: str = DEFAULT) -> Waiters:
        here = self._waiters.setdefault(asyncio.get_running_loop(), {})
        waiters = here.get(database)
        if waiters is None:
            waiters = here[database] = Waiters(await self.backend(database))
        return waiters

    def note_finished(self, job_ids: Iterable[int]) -> None:
        """A worker on this loop wrote these jobs' final outcomes: wake its waiters directly
        (a ``Registry.on_finished`` listener)."""
        try:
            here = self._waiters.get(asyncio.get_running_loop())
        except RuntimeError:
            return
        for waiters in (here or {}).values():
            waiters.hint(job_ids)

    async def close(self) -> None:
        """Stop this loop's waiters (the App closes them before its backend)."""
        here = self._waiters.pop(asyncio.get_running_loop(), None)
        for waiters in (here or {}).values():
            await waiters.close()
