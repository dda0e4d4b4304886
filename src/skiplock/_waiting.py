"""Waiting for results: one registry of waiting futures and one watch per process and loop.

However many handles are awaited, a process holds one LISTEN (PostgreSQL's completion
channel; SQLite's data-version watch) and answers every wake-up with one query for the ids it
concerns. Completion wakes waiters the way enqueue wakes workers: the completion statement's
NOTIFY names the finished ids, a worker in this process tells the registry directly, and a
poll backstop covers a lost notification or watch.

The watch is a detached ``Service`` (the one lifecycle of every background loop): an
unexpected error in it is logged at once and fails the waits it was serving (they would
otherwise hang until their timeout), and the next wait starts it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from ._backends import Backend
from ._job import JobOutcome, JobState
from ._service import Service
from .errors import BackendError, BackendUnavailable, JobCancelled, JobFailed, JobNotFound

log = logging.getLogger("skiplock")

BACKSTOP_S = 2.0
"""How long waiters trust the wake-ups alone before they check every waited id anyway."""

LINGER_S = 5.0
"""How long the watch keeps listening after its last waiter, for the next one."""

CHECK_CHUNK = 5000
"""Ids per outcome query: one query per wake-up up to this many waiters."""


def unwrap(outcome: JobOutcome) -> Any:
    """A finished job's value, or the error its end stands for."""
    if outcome.state == JobState.SUCCEEDED:
        return None if outcome.result_json is None else json.loads(outcome.result_json)
    error = outcome.last_error or {}
    message = str(error.get("message") or "")
    if outcome.state == JobState.CANCELLED:
        raise JobCancelled(f"job {outcome.id} was cancelled: {message}", job_id=outcome.id)
    kind, _, text = message.partition(": ")
    raise JobFailed(
        f"job {outcome.id} failed: {message}",
        job_id=outcome.id,
        error_type=kind if text else message,
        error_message=text,
        traceback=str(error.get("traceback") or ""),
    )


class Waiters:
    """The waiting futures of one event loop, and the one watch that resolves them."""

    def __init__(self, backend: Backend, backstop_s: float = BACKSTOP_S) -> None:
        self._backend = backend
        self.backstop_s = backstop_s
        self._waiting: dict[int, set[asyncio.Future[JobOutcome]]] = {}
        self._hinted: set[int] = set()
        self._check_all = False
        self._wake = asyncio.Event()
        self._watch = _Watch(self)
        self.checks = 0
        """Outcome queries made (tests assert one per wake-up, not one per waiter)."""

    async def outcomes(
        self, job_ids: Sequence[int], timeout: float | None
    ) -> dict[int, JobOutcome]:
        """Each job's outcome once all are final; TimeoutError leaves the jobs running."""
        loop = asyncio.get_running_loop()
        mine = {job_id: loop.create_future() for job_id in dict.fromkeys(job_ids)}
        for job_id, future in mine.items():
            self._waiting.setdefault(job_id, set()).add(future)
        self.hint(None)
        self._ensure_watch()
        try:
            async with asyncio.timeout(timeout):
                return {job_id: await future for job_id, future in mine.items()}
        finally:
            self._forget(mine)

    def hint(self, job_ids: Iterable[int] | None) -> None:
        """These jobs finished (None: any may have); wake the watch if one is awaited."""
        if job_ids is None:
            self._check_all = True
        else:
            self._hinted.update(i for i in job_ids if i in self._waiting)
            if not self._hinted:
                return
        self._wake.set()

    async def close(self) -> None:
        self._watch.stop()
        await self._watch.join()

    def _forget(self, mine: dict[int, asyncio.Future[JobOutcome]]) -> None:
        for job_id, future in mine.items():
            if future.done() and not future.cancelled():
                future.exception()  # retrieved: a waiter that gave up logs no stray error
            future.cancel()
            others = self._waiting.get(job_id)
            if others is not None:
                others.discard(future)
                if not others:
                    del self._waiting[job_id]

    def _ensure_watch(self) -> None:
        self._watch.spawn()  # nothing if it runs; a watch that ended (or died) starts afresh

    def _died(self, exc: BaseException) -> None:
        """The watch died (already logged): every wait it served fails with its error."""
        self._fail(list(self._waiting), exc if isinstance(exc, Exception) else RuntimeError(exc))

    async def _run(self) -> None:
        """Listen while anyone waits, and ``LINGER_S`` after (one connection for a run of
        waits, not one per wait); a lost or failed listen falls back to the backstop."""
        busy = True
        while busy or self._waiting:  # a waiter may arrive while the listen closes
            if not self._backend.supports_push:  # behind a pooler with no listen_url
                busy = await self._serve(None)
                continue
            try:
                async with self._backend.listen_done(self.hint) as lost:
                    busy = await self._serve(lost)
            except BackendError as exc:
                log.warning("result watch: cannot listen (%s); polling instead", exc)
                busy = await self._serve(None)

    async def _serve(self, lost: asyncio.Event | None) -> bool:
        """Answer wake-ups with one query each, checking everyone at least every
        ``backstop_s``; until the listen is lost (True) or nobody waited for ``LINGER_S``
        (False). Without a listen, one round."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.backstop_s if self._waiting else LINGER_S):
                    await self._wake.wait()
            woke = self._wake.is_set()
            self._wake.clear()
            if not self._waiting:
                if not woke:
                    return False
                continue
            self._check_all = self._check_all or not woke  # the backstop: check everyone
            await self._check()
            if lost is None or lost.is_set():
                return True

    async def _check(self) -> None:
        ids = list(self._waiting) if self._check_all else list(self._hinted & set(self._waiting))
        self._check_all = False
        self._hinted.clear()
        for start in range(0, len(ids), CHECK_CHUNK):
            chunk = ids[start : start + CHECK_CHUNK]
            try:
                self.checks += 1
                found = await self._backend.job_outcome_many(chunk)
            except BackendUnavailable as exc:
                log.warning("result watch: %s; checking again in %.1fs", exc, self.backstop_s)
                return
            except BackendError as exc:
                self._fail(chunk, exc)
                continue
            self._resolve(chunk, found)

    def _resolve(self, asked: list[int], found: list[JobOutcome]) -> None:
        missing = set(asked)
        for outcome in found:
            missing.discard(outcome.id)
            if outcome.state in JobState.final():
                self._settle(outcome.id, outcome)
        for job_id in missing:
            self._fail([job_id], JobNotFound(f"no job with id {job_id}"))

    def _settle(self, job_id: int, outcome: JobOutcome) -> None:
        for future in self._waiting.pop(job_id, ()):
            if not future.done():
                future.set_result(outcome)

    def _fail(self, job_ids: list[int], exc: Exception) -> None:
        for job_id in job_ids:
            for future in self._waiting.pop(job_id, ()):
                if not future.done():
                    future.set_exception(exc)


class _Watch(Service):
    """The one watch of a ``Waiters``: listens and answers wake-ups while anyone waits."""

    name = "result watch"

    def __init__(self, waiters: Waiters) -> None:
        super().__init__()
        self._waiters = waiters
        self.on_error = waiters._died

    async def serve(self) -> None:
        await self._waiters._run()
