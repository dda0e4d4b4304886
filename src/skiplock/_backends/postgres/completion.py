"""PostgreSQL's outcomes: a batch written on the outcome sessions or with its release,
the workflow release that follows, the own-NOTIFY suppression; reclaims and heartbeats."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import asyncpg

from ..._job import Completion, ReclaimedJob
from .. import completion_flow as cf
from .. import workflow_flows as wf
from ..job_rows import by_lane, held_by_lane, reclaimed_jobs
from ..params import JobHeartbeatManyParams, JobReclaimWorkerParams
from ..protocol import MAX_ERRORS_KEPT
from ..workflow_params import WorkflowAfterCompletionParams
from . import rows as ops
from .connection import WORKFLOW_TRIES, Connection, R
from .errors import CONNECTION_ERRORS, retry_moved
from .errors import wrapped as _wrapped
from .statements import RELEASE_CHUNK

OWN_NOTIFY_S = 2.0
"""How long the NOTIFY of a release of ours is expected (it comes at the commit)."""


def _jobs(rows: Sequence[Any]) -> list[cf.WrittenJob]:
    return [cf.WrittenJob(r["id"], r["parented"], r["succeeded"], r["parked"]) for r in rows]


class Outcomes(Connection):
    """Outcomes, and the workflow release a completion runs; reclaims and heartbeats. What a
    completion decides is ``completion_flow``'s; this room binds, runs and reads."""

    if TYPE_CHECKING:  # other rooms' operations this one uses

        async def workflow_release(self, parents: Sequence[int]) -> list[int]: ...

        def _wf_answers(self, conn: Any) -> Any: ...

        async def workflow_after_completion(
            self, params: WorkflowAfterCompletionParams
        ) -> list[int]: ...

    async def job_set_state_if_running_many(self, completions: Sequence[Completion]) -> list[int]:
        if not completions:
            return []
        done: list[int] = []
        # each lane's outcomes in statements of their own, every one naming its lane (one
        # group, as many statements as before, in a database of one lane)
        for lane, batch in by_lane(completions).items():
            flow = cf.write_outcomes(
                batch, can_release=self._by_id_small_pool is not None, chunk=RELEASE_CHUNK
            )
            answer = functools.partial(self._answer_completion, lane=lane)
            with _wrapped("job_set_state_if_running_many"):
                written = await cf.drive_async(flow, answer)
            await self._follow_completion(written, lane)
            done += [j.id for j in written.jobs]
        return done

    async def _follow_completion(self, written: cf.Written, lane: str) -> None:
        """What the completion statements left to workflows (``completion_flow.follow``)."""
        answer = functools.partial(self._answer_completion, lane=lane)
        await cf.drive_async(cf.follow(written, RELEASE_CHUNK), answer)

    async def _release_stale(self, children: list[int], lane: str) -> None:
        answer = functools.partial(self._answer_completion, lane=lane)
        await cf.drive_async(cf.release_stale(children), answer)

    async def _release_succeeded(self, parents: list[int], lane: str) -> None:
        answer = functools.partial(self._answer_completion, lane=lane)
        await cf.drive_async(cf.release_succeeded(parents, RELEASE_CHUNK), answer)

    async def _answer_completion(self, step: Any, *, lane: str) -> Any:
        """A step of ``completion_flow`` for the outcomes of ``lane``, answered by a
        statement of ours."""
        if isinstance(step, cf.WriteAlone):
            return await self._write_alone(step, lane)
        if isinstance(step, cf.WriteReleasing):
            small = self._by_id_small_pool
            assert small is not None  # the flow asks only where it is open (can_release)
            try:
                return await self._write_releasing(small, step, lane)
            except asyncpg.PostgresError as exc:
                if isinstance(exc, CONNECTION_ERRORS):
                    raise
                return cf.Refused(str(exc))
        if isinstance(step, cf.Tell):
            self._tell_released(step.woken)
            return None
        if isinstance(step, cf.ChildrenReady):
            return await self._children_ready_alone(step.children)
        if isinstance(step, cf.ReleaseChunk):
            return await self._release_chunk(step, lane)
        if isinstance(step, cf.ReleaseBuried):
            await self.workflow_release(step.parents)
            return None
        if isinstance(step, cf.AfterCompletion):
            params = WorkflowAfterCompletionParams(step.finished, step.parked)
            await self.workflow_after_completion(params)
            return None
        raise TypeError(f"not a completion step: {step!r}")

    def _params(self, completions: Sequence[Completion], long_segments: bool) -> list[Any]:
        segments = ops.LONG_SEGMENTS if long_segments else None
        return ops.completion_params(completions, self._now(), self.done_channel, segments)

    async def _write_alone(self, step: cf.WriteAlone, lane: str) -> cf.Written:
        """JOB_SET_STATE_IF_RUNNING_MANY: the outcomes (all of ``lane``) alone."""
        params = self._params(step.completions, step.long_segments)
        rows = await self._by_id(self._sql.JOB_SET_STATE_IF_RUNNING_MANY, *params, lane)
        return cf.Written(_jobs(rows), params[13] is not None)

    async def _write_releasing(
        self, small: asyncpg.Pool, step: cf.WriteReleasing, lane: str
    ) -> cf.Released:
        """JOB_SET_STATE_AND_RELEASE on the small batches' session (see ``open``): the
        outcomes (all of ``lane``), and a chunk of the release of the children of those that
        succeeded."""
        params = self._params(step.completions, step.long_segments)
        statement = self._sql.JOB_SET_STATE_AND_RELEASE

        async def attempt() -> list[Any]:
            async with self._releasing(small) as (conn, woken):
                args = (*params, self.channel, step.chunk, lane)
                rows: list[Any] = await conn.fetch(statement, *args)
                if rows:
                    woken.update(rows[0]["woken"] or ())
                return rows

        rows = await self._deadlock_retried(attempt)
        given = params[13] is not None
        if not rows:
            return cf.Released([], given, 0, set(), [])
        first = rows[0]  # the release's columns repeat on every row
        return cf.Released(
            _jobs(rows),
            given,
            int(first["resolved_n"]),
            set(first["woken"] or ()),
            list(first["stale"] or ()),
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

    async def _children_ready_alone(self, children: list[int]) -> tuple[set[str], list[int]]:
        """CHILDREN_READY in a statement of its own: the queues it woke, the children it
        buried."""

        async def attempt() -> tuple[set[str], list[int]]:
            async with self._releasing(self.pool) as (conn, woken):
                buried = await self._children_ready(conn, children, woken)
                return woken, buried

        with _wrapped("workflow_release"):
            return await self._deadlock_retried(attempt)

    async def _children_ready(self, conn: Any, children: list[int], woken: set[str]) -> list[int]:
        """CHILDREN_READY on ``conn``, as the workflow flows' ``Ready`` step binds and reads
        it (one binding of the statement): the queues it woke added to ``woken``; the
        children it buried (their list of results over the bound) returned."""
        answers = self._wf_answers(conn)
        _released, buried = await answers.answer(wf.Ready(children))
        woken.update(answers.woken)
        return list(buried)

    async def _release_chunk(
        self, step: cf.ReleaseChunk, lane: str
    ) -> tuple[int, set[str], list[int]]:
        """RELEASE_SUCCEEDED, committed alone; the children it left at zero (stale) by
        CHILDREN_READY, whose snapshot sees their every parent's result (the sweep's
        StrandedWaits should this process die between the two)."""
        statement = self._wf.RELEASE_SUCCEEDED

        async def attempt() -> tuple[int, set[str], list[int]]:
            async with self._releasing(self.pool) as (conn, woken):
                row = await conn.fetchrow(
                    statement, step.parents, self.channel, self._now(), step.chunk, lane
                )
                assert row is not None  # one row, always
                woken.update(row["woken"] or ())
                buried = []
                if row["stale"]:
                    buried = await self._children_ready(conn, row["stale"], woken)
                return int(row["resolved_n"]), woken, buried

        with _wrapped("workflow_release"):
            return await self._deadlock_retried(attempt)

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

    async def job_cancel_requested(self, job_ids: Sequence[int]) -> list[int]:
        if not job_ids:
            return []
        with _wrapped("job_cancel_requested"):
            rows = await self.pool.fetch(self._sql.JOB_CANCEL_REQUESTED, list(job_ids))
        return [r["id"] for r in rows]

    async def job_reclaim_expired(
        self, into: list[ReclaimedJob] | None = None, lane: str = "default"
    ) -> list[int]:
        with _wrapped("job_reclaim_expired"):
            rows = await self._retrying.fetch(
                self._sql.JOB_RECLAIM_EXPIRED, self._now(), MAX_ERRORS_KEPT, lane
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
                params.lane,
            )
        if params.into is not None:
            params.into.extend(reclaimed_jobs(rows))
        return [r["id"] for r in rows]

    async def job_heartbeat_many(self, params: JobHeartbeatManyParams) -> list[tuple[int, str]]:
        if not params.held:
            return []
        kept: list[tuple[int, str]] = []
        for lane, held in held_by_lane(params).items():  # one statement a lane
            args = (
                [job_id for job_id, _ in held],
                [token for _, token in held],
                params.default_lease,
                params.lease_margin,
                self._now(),
                [pair in params.started for pair in held],
                [params.progress.get(job_id) for job_id, _ in held],
                ops.heartbeat_segments(params.segments),
                lane,
            )
            with _wrapped("job_heartbeat_many"):
                # A row the rotation or an outcome moved to another partition meanwhile is
                # run again, not reported as an outage (seen under readers: "database
                # unavailable: job_heartbeat_many: ... moved to another partition").
                rows = await retry_moved(
                    functools.partial(self._by_id, self._sql.JOB_HEARTBEAT_MANY, *args)
                )
            kept += [(r["id"], r["lease_token"]) for r in rows]
        return kept
