"""PostgreSQL's outcomes: a batch written on the generic plan's session or with its release,
the workflow release that follows, the own-NOTIFY suppression; reclaims and heartbeats."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import asyncpg

from ..._job import Completion, ReclaimedJob
from ...errors import BackendError
from ..job_rows import reclaimed_jobs
from ..params import JobHeartbeatManyParams, JobReclaimWorkerParams
from ..protocol import MAX_ERRORS_KEPT
from ..workflow_params import WorkflowAfterCompletionParams
from . import rows as ops
from .connection import WORKFLOW_TRIES, Connection, R, log
from .errors import CONNECTION_ERRORS, retry_moved
from .errors import wrapped as _wrapped
from .statements import RELEASE_CHUNK

SMALL_OUTCOME_BATCH = 4
"""Up to how many outcomes a batch is written on the generic plan's session (see ``open``)."""

OWN_NOTIFY_S = 2.0
"""How long the NOTIFY of a release of ours is expected (it comes at the commit)."""


@dataclasses.dataclass(slots=True)
class _Written:
    """What completion statements wrote: their rows (one a job written), whether they were
    looked for in given segments, and what is left to workflows: the queues the statement's
    own release woke, the children it left at zero for a newer snapshot, and the jobs whose
    children are (still) to release."""

    rows: list[Any]
    segments_given: bool
    woken: set[str] = dataclasses.field(default_factory=set)
    stale: list[int] = dataclasses.field(default_factory=list)
    release_later: list[int] = dataclasses.field(default_factory=list)

    def add(self, more: _Written) -> None:
        self.rows += more.rows
        self.woken |= more.woken
        self.stale += more.stale
        self.release_later += more.release_later


class Outcomes(Connection):
    """Outcomes, and the workflow release a completion runs; reclaims and heartbeats."""

    if TYPE_CHECKING:  # other rooms' operations this one uses

        async def workflow_release(self, parents: Sequence[int]) -> list[int]: ...

        async def workflow_after_completion(
            self, params: WorkflowAfterCompletionParams
        ) -> list[int]: ...

    async def job_set_state_if_running_many(self, completions: Sequence[Completion]) -> list[int]:
        if not completions:
            return []
        # First in the segments the jobs were claimed from (nearly always one), then what that
        # missed in the long segment, where a rotation moves a job that ran past its
        # segment's turn (the rest of the missed lost their lease: found nowhere).
        with _wrapped("job_set_state_if_running_many"):
            written = await self._write_outcomes(completions, None)
            done = [r["id"] for r in written.rows]
            if written.segments_given and len(done) < len(completions):
                found = set(done)
                missed = [c for c in completions if c.job_id not in found]
                more = await self._write_outcomes(missed, ops.LONG_SEGMENTS)
                written.add(more)
                done += [r["id"] for r in more.rows]
        await self._follow_completion(written)
        return done

    async def _write_outcomes(
        self, completions: Sequence[Completion], segments: list[int] | None
    ) -> _Written:
        """One completion statement. A few outcomes go to the generic plan's session, in the
        statement that also releases the children of those that succeeded (one round trip
        for a chain's link); a batch to the custom plan's sessions, its releases after it."""
        params = ops.completion_params(completions, self._now(), self.done_channel, segments)
        small = self._by_id_small_pool
        if small is None or len(completions) > SMALL_OUTCOME_BATCH:
            return await self._write_outcomes_alone(params)
        try:
            return await self._write_outcomes_releasing(small, params)
        except asyncpg.PostgresError as exc:
            if isinstance(exc, CONNECTION_ERRORS):
                raise
            # the release refused (a user's trigger, a limit): the outcomes must not wait for
            # it; written alone, the release is tried after them (and by the sweep)
            log.warning("a completion's own release failed (%s); writing the outcomes alone", exc)
            return await self._write_outcomes_alone(params)

    async def _write_outcomes_alone(self, params: list[Any]) -> _Written:
        """The completion statement without a release: the children of the jobs that
        succeeded are released after it (``release_later``)."""
        rows = await self._by_id(self._sql.JOB_SET_STATE_IF_RUNNING_MANY, *params)
        later = [r["id"] for r in rows if r["parented"] and r["succeeded"]]
        return _Written(list(rows), params[13] is not None, release_later=later)

    async def _write_outcomes_releasing(self, small: asyncpg.Pool, params: list[Any]) -> _Written:
        """The completion statement that releases the children of the jobs that succeeded in
        the same statement (a chunk of them: the rest ``release_later``)."""
        given = params[13] is not None
        statement = self._sql.JOB_SET_STATE_AND_RELEASE

        async def attempt() -> list[Any]:
            async with self._releasing(small) as (conn, woken):
                rows: list[Any] = await conn.fetch(statement, *params, self.channel, RELEASE_CHUNK)
                if rows:
                    woken.update(rows[0]["woken"] or ())
                return rows

        rows = await self._deadlock_retried(attempt)
        if not rows:
            return _Written([], given)
        first = rows[0]  # the release's columns repeat on every row
        full = first["resolved_n"] >= RELEASE_CHUNK
        return _Written(
            list(rows),
            given,
            woken=set(first["woken"] or ()),
            stale=list(first["stale"] or ()),
            release_later=[r["id"] for r in rows if r["succeeded"]] if full else [],
        )

    async def _deadlock_retried(self, attempt: Callable[[], Awaitable[R]]) -> R:
        """``attempt`` (one statement, or a transaction), run again on a row moved between
        partitions, and where PostgreSQL broke it off to end a deadlock (a person's cancel
        of a waiting child locks it and its wait row the other way round)."""
        for tries_left in range(WORKFLOW_TRIES - 1, -1, -1):
            try:
                return await retry_moved(attempt)
            except asyncpg.exceptions.DeadlockDetectedError:
                if not tries_left:
                    raise
        raise AssertionError("unreachable")

    async def _follow_completion(self, written: _Written) -> None:
        """What the completion statement left to workflows: tell this process's workers of
        the children it released; release the children it left at zero for a newer
        snapshot, and the rest (or all) of the children of jobs that succeeded
        (RELEASE_SUCCEEDED, a chunk a transaction); resume, in a flow, the children of jobs
        that failed and parked jobs already signalled. A failure here leaves it to the sweep
        (the outcomes are written)."""
        self._tell_released(written.woken)
        failed = [r["id"] for r in written.rows if r["parented"] and not r["succeeded"]]
        parked = [r["id"] for r in written.rows if r["parked"]]
        try:
            if written.stale:
                await self._release_stale(written.stale)
            if written.release_later:
                await self._release_succeeded(written.release_later)
            if failed or parked:
                await self.workflow_after_completion(WorkflowAfterCompletionParams(failed, parked))
        except BackendError as exc:
            log.warning("workflow release after a completion failed (the sweep will): %s", exc)

    async def _release_stale(self, children: list[int]) -> None:
        """Children a release left at zero (their wait row was newer than its snapshot, or
        the list of their parents' results is over the bound): released (or buried) by a
        statement of their own, which sees every parent's result."""

        async def attempt() -> tuple[set[str], list[int]]:
            async with self._releasing(self.pool) as (conn, woken):
                buried = await self._children_ready(conn, children, woken)
                return woken, buried

        with _wrapped("workflow_release"):
            woken, buried = await self._deadlock_retried(attempt)
            self._tell_released(woken)
        await self._release_buried(buried)

    async def _children_ready(self, conn: Any, children: list[int], woken: set[str]) -> list[int]:
        """CHILDREN_READY on ``conn``: the queues it woke added to ``woken``; the children it
        buried (their list of results over the bound) returned."""
        rows = await conn.fetch(
            self._wf.CHILDREN_READY, children, self.channel, self._now(), self.max_payload_bytes
        )
        woken.update(r["queue"] for r in rows if not r["buried"])
        return [r["id"] for r in rows if r["buried"]]

    async def _release_buried(self, buried: list[int]) -> None:
        """The children of jobs a release buried follow their policies (as a dead parent's
        do): at once, or by the sweep should this fail."""
        if buried:
            await self.workflow_release(buried)

    @asynccontextmanager
    async def _releasing(self, pool: asyncpg.Pool) -> AsyncIterator[tuple[Any, set[str]]]:
        """A session of ``pool`` for a release of ours, and the set its caller fills with the
        queues the release woke: the NOTIFYs the session sends meanwhile are held, then
        settled (``_settle_own_notifies``)."""
        async with pool.acquire() as conn:
            woken: set[str] = set()
            pid: int = conn.get_server_pid()
            self._held_notifies[pid] = []
            try:
                yield conn, woken
            finally:
                self._settle_own_notifies(pid, woken)

    def _settle_own_notifies(self, pid: int, woken: set[str]) -> None:
        """The NOTIFY a release of ours on session ``pid`` sends at its commit would wake
        this process's workers a second time (``on_released`` tells them, and the claim that
        follows begins after the commit): a claim that finds nothing, in the path of the
        next link of a chain (a claim a link, not two). Those that came while the release
        ran (held) are dropped, those still to come are expected (and dropped when they do),
        only where a worker here is told; any other is passed on."""
        held = self._held_notifies.pop(pid, [])
        told = woken if self.on_released is not None else set()
        for queue in held:
            if queue not in told:
                for wake in list(self._wakers):
                    wake(queue)
        until = time.monotonic() + OWN_NOTIFY_S
        for queue in told.difference(held):
            self._own_notifies[(pid, queue)] = until

    def _notified(self, pid: int, queue: str) -> bool:
        """Whether the NOTIFY from session ``pid`` should wake: False for one a release of
        ours sent (held while it runs, or expected after it)."""
        held = self._held_notifies.get(pid)
        if held is not None:
            held.append(queue)
            return False
        until = self._own_notifies.pop((pid, queue), None)
        if len(self._own_notifies) > 1000:  # releases whose commit failed leave theirs
            now = time.monotonic()
            self._own_notifies = {k: t for k, t in self._own_notifies.items() if t > now}
        return until is None or until <= time.monotonic()

    def _tell_released(self, woken: set[str]) -> None:
        if woken and self.on_released is not None:
            self.on_released(woken)

    async def _release_succeeded(self, parents: list[int]) -> None:
        """The children of ``parents`` (succeeded), RELEASE_CHUNK edges a transaction, until
        a chunk comes back short."""
        statement = self._wf.RELEASE_SUCCEEDED

        async def attempt() -> tuple[int, set[str], list[int]]:
            # one statement, committed alone; children it left at zero (stale) by a second,
            # whose snapshot sees their every parent's result (the sweep's StrandedWaits
            # should this process die between the two)
            async with self._releasing(self.pool) as (conn, woken):
                row = await conn.fetchrow(
                    statement, parents, self.channel, self._now(), RELEASE_CHUNK
                )
                assert row is not None  # one row, always
                woken.update(row["woken"] or ())
                buried = []
                if row["stale"]:
                    buried = await self._children_ready(conn, row["stale"], woken)
                return int(row["resolved_n"]), woken, buried

        buried: list[int] = []
        with _wrapped("workflow_release"):
            while True:
                resolved, woken, more = await self._deadlock_retried(attempt)
                self._tell_released(woken)
                buried += more
                if resolved < RELEASE_CHUNK:
                    break
        await self._release_buried(buried)

    async def job_cancel_requested(self, job_ids: Sequence[int]) -> list[int]:
        if not job_ids:
            return []
        with _wrapped("job_cancel_requested"):
            rows = await self.pool.fetch(self._sql.JOB_CANCEL_REQUESTED, list(job_ids))
        return [r["id"] for r in rows]

    async def job_reclaim_expired(self, into: list[ReclaimedJob] | None = None) -> list[int]:
        with _wrapped("job_reclaim_expired"):
            rows = await self._retrying.fetch(
                self._sql.JOB_RECLAIM_EXPIRED, self._now(), MAX_ERRORS_KEPT
            )
        if into is not None:
            into += reclaimed_jobs(rows)
        return [r["id"] for r in rows]

    async def job_reclaim_worker(self, params: JobReclaimWorkerParams) -> list[int]:
        with _wrapped("job_reclaim_worker"):
            rows = await self._retrying.fetch(
                self._sql.JOB_RECLAIM_WORKER,
                self._now(),
                MAX_ERRORS_KEPT,
                params.worker_id,
                params.why,
            )
        if params.into is not None:
            params.into.extend(reclaimed_jobs(rows))
        return [r["id"] for r in rows]

    async def job_heartbeat_many(self, params: JobHeartbeatManyParams) -> list[tuple[int, str]]:
        if not params.held:
            return []
        with _wrapped("job_heartbeat_many"):
            rows = await self._by_id(
                self._sql.JOB_HEARTBEAT_MANY,
                [job_id for job_id, _ in params.held],
                [token for _, token in params.held],
                params.default_lease,
                params.lease_margin,
                self._now(),
                [pair in params.started for pair in params.held],
                [params.progress.get(job_id) for job_id, _ in params.held],
                ops.heartbeat_segments(params.segments),
            )
        return [(r["id"], r["lease_token"]) for r in rows]
