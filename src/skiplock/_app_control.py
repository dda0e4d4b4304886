"""``Operations``: what a person drives through ``App``: inspecting jobs, retrying and
cancelling them, the dead-letter actions, the audit trail, and the queue and task controls
stored in the database (so every producer and worker agrees).

A part the App composes, over the backend and the ``Registry`` (the tasks and queues it
knows, the wake-ups after a requeue); it never sees the App. The public methods' documentation
is on ``App``, which delegates to these one to one."""

from __future__ import annotations

import enum
import getpass
import socket
from collections.abc import Callable
from typing import Any, TypeVar

from ._backends import BackendGetter
from ._backends.params import (
    AuditListParams,
    AuditPruneParams,
    AuditRecordParams,
    DeadActionParams,
    JobActionParams,
    JobFindParams,
    JobListParams,
    JobPruneParams,
    JobReclaimWorkerParams,
    QueueSetLimitsParams,
    QueueSetPausedParams,
    TaskPauseParams,
)
from ._job import (
    AuditEntry,
    CronRun,
    DeadGroup,
    JobFilter,
    JobRecord,
    JobState,
    QueueInfo,
    TaskPause,
)
from ._limits import (
    MAX_TEXT_CHARS,
    check_aging,
    check_int,
    check_rate,
    check_seconds,
    check_text,
)
from ._registry import Registry
from .errors import ConfigurationError, DuplicateJob


class Kept(enum.Enum):
    """A queue setting left out of ``set_queue_limits``: it stays as it is (None lifts one)."""

    KEPT = "kept"

    def __repr__(self) -> str:
        return "KEPT"


KEPT = Kept.KEPT
T = TypeVar("T")


_QUEUE_LIMIT_CHECKS: dict[str, Callable[[str, Any], object]] = {
    "max_depth": lambda option, value: check_int(option, value, 0),
    "max_running": lambda option, value: check_int(option, value, 0),
    "rate_per_s": check_rate,
    "aging_s": check_aging,
}
"""Each queue setting's bound (``_limits``), for a value given (None lifts it)."""


def _set(value: T | Kept | None) -> T | None:
    """A setting's value for the backend (one left out is not among ``given``: its value
    is never read)."""
    return None if value is KEPT else value


def default_who() -> str:
    """Who a person's action is recorded as when they do not say: user@host."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


def _who(who: str) -> str:
    """Who a person's action is recorded as on the job's row: their words checked at the
    edge (at most MAX_TEXT_CHARS, no NUL: every entry of a row's trail stays small), or
    ``user@host``."""
    if who:
        check_text("who", who)
    return who or default_who()


def _checked(where: JobFilter) -> JobFilter:
    """A bulk action's filter, its limit checked at the edge (the same bound on both
    backends; SQLite would read a negative LIMIT as none)."""
    check_int("limit", where.limit, 1)
    return where


def _dead(where: JobFilter) -> str:
    pairs = (("task", where.task), ("error", where.error), ("last_error", where.last_error))
    parts = [f"{k}={v[:200]!r}" for k, v in pairs if v]  # a filter may be 4000 characters
    parts.append(f"limit={where.limit}")
    return f"dead jobs ({', '.join(parts)})"


def _ids(ids: list[int]) -> str:
    shown = ", ".join(map(str, ids[:20]))
    return f"{len(ids)} jobs: {shown}{' ...' if len(ids) > 20 else ''}"


class Operations:
    """The person-driven operations of one app, over its backend and its registry."""

    def __init__(self, backend: BackendGetter, registry: Registry) -> None:
        self.backend = backend
        self._registry = registry

    # -- the audit trail ----------------------------------------------------------------------

    async def record_action(
        self, what: str, *, who: str = "", target: str = "", detail: str = ""
    ) -> None:
        check_text("what", what)
        for name, value in (("who", who), ("target", target), ("detail", detail)):
            if value:
                check_text(name, value)
        await self._audit(what, who, target, detail)

    async def _audit(self, what: str, who: str, target: str, detail: str = "") -> None:
        """``record_action`` for skiplock's own operations: a 4000-character queue name or
        filter is cut to fit, never a refusal of an action that already happened."""
        fit = [
            v.replace("\x00", "")[:MAX_TEXT_CHARS]
            for v in (what, who or default_who(), target, detail)
        ]
        params = AuditRecordParams(fit[1], fit[0], fit[2], fit[3])
        await (await self.backend()).audit_record(params)

    async def audit_trail(
        self, *, limit: int = 100, before_id: int | None = None
    ) -> list[AuditEntry]:
        check_int("limit", limit, 1, 10_000)
        if before_id is not None:
            check_int("before_id", before_id, 1, 2**63 - 1)
        return await (await self.backend()).audit_list(AuditListParams(limit, before_id))

    # -- jobs and dead letters ----------------------------------------------------------------

    async def get_job(self, job_id: int) -> JobRecord:
        return await (await self.backend()).job_get(job_id)

    async def release_worker(self, worker_id: str) -> list[int]:
        if not isinstance(worker_id, str) or not worker_id.strip():
            raise ConfigurationError(f"worker_id must be a worker's id (got {worker_id!r})")
        backend = await self.backend()
        return [
            job_id
            for lane in backend.lanes
            for job_id in await backend.job_reclaim_worker(
                JobReclaimWorkerParams(worker_id, lane=lane)
            )
        ]

    async def retry_job(self, job_id: int, *, who: str = "") -> bool:
        try:
            done = await (await self.backend()).job_retry(JobActionParams(job_id, _who(who)))
        except DuplicateJob as exc:
            raise DuplicateJob(
                f"job {job_id} was not retried: another job holds its unique key"
            ) from exc
        await self._audit("retry", who, f"job {job_id}", "" if done else "not finished")
        if done:
            job = await self.get_job(job_id)
            self._registry.wake_queues([job.queue])
        return done

    async def cancel_job(self, job_id: int, *, who: str = "") -> JobState:
        backend = await self.backend()
        state = await backend.job_cancel(JobActionParams(job_id, _who(who)))
        await self._audit("cancel", who, f"job {job_id}", state.value)
        if state is JobState.CANCELLED:  # its waiting children follow their policy now
            await backend.workflow_release([job_id])
        return state

    async def list_jobs(
        self,
        state: JobState | None = None,
        where: JobFilter | None = None,
        *,
        before_id: int | None = None,
        oldest_first: bool = False,
    ) -> list[JobRecord]:
        if before_id is not None:
            check_int("before_id", before_id, 1, 2**63 - 1)
        params = JobListParams(where or JobFilter(), state, before_id, oldest_first)
        return await (await self.backend()).job_list(params)

    async def count_jobs(
        self, state: JobState | None = None, where: JobFilter | None = None
    ) -> int:
        return await (await self.backend()).job_count(JobListParams(where or JobFilter(), state))

    async def count_jobs_by_state(self, where: JobFilter | None = None) -> dict[str, int]:
        return await (await self.backend()).job_count_states(JobListParams(where or JobFilter()))

    async def find_jobs(self, text: str, *, limit: int = 50) -> list[JobRecord]:
        check_int("limit", limit, 1, 10_000)
        if not isinstance(text, str) or len(text) > 4000 or "\x00" in text:
            raise ConfigurationError(f"find_jobs: text {text!r:.80}: a string, at most 4000 chars")
        text = text.strip()
        if not text:
            return []
        found: list[JobRecord] = []
        if text.isascii() and text.isdigit() and 0 < int(text) <= 2**63 - 1:
            found = await self.list_jobs(None, JobFilter(ids=(int(text),), limit=1))
        backend = await self.backend()
        seen = {j.id for j in found}
        found += [j for j in await backend.job_find(JobFindParams(text, limit)) if j.id not in seen]
        return found[:limit]

    async def dead_groups(self, limit: int = 200) -> list[DeadGroup]:
        check_int("limit", limit, 1)
        return await (await self.backend()).job_dead_groups(limit)

    async def cron_last_runs(self) -> list[CronRun]:
        return await (await self.backend()).cron_last_runs()

    async def requeue_dead(self, where: JobFilter, *, who: str = "") -> list[int]:
        params = DeadActionParams(_checked(where), _who(who))
        ids = await (await self.backend()).job_requeue_dead(params)
        await self._audit("requeue dead", who, _dead(where), _ids(ids))
        if ids:
            self._registry.wake_queues([where.queue] if where.queue else ["*"])
        return ids

    async def discard_dead(self, where: JobFilter, *, who: str = "") -> list[int]:
        params = DeadActionParams(_checked(where), _who(who))
        ids = await (await self.backend()).job_discard_dead(params)
        await self._audit("discard dead", who, _dead(where), _ids(ids))
        return ids

    async def prune(
        self, *, finished_age_s: float, dead_age_s: float, batch: int = 1000, who: str = ""
    ) -> int:
        params = _prune_params(finished_age_s, dead_age_s, batch)
        backend = await self.backend()
        total = 0
        while (deleted := await backend.job_prune(params)) > 0:
            total += deleted
        while await backend.workflow_prune(batch) > 0:  # what workflows left behind
            pass
        ages = f"finished_age_s={finished_age_s} dead_age_s={dead_age_s}"
        await self._audit("prune", who, "jobs", f"{total} rows; {ages}")
        return total

    async def prune_preview(self, *, finished_age_s: float, dead_age_s: float) -> dict[str, int]:
        params = _prune_params(finished_age_s, dead_age_s, 1)
        return await (await self.backend()).job_prune_preview(params)

    async def prune_audit(self, *, age_s: float, batch: int = 1000, who: str = "") -> int:
        age_s, batch = check_seconds("age_s", age_s), check_int("batch", batch, 1)
        backend = await self.backend()
        total = 0
        while (deleted := await backend.audit_prune(AuditPruneParams(age_s, batch))) > 0:
            total += deleted
        await self._audit("prune audit trail", who, "audit trail", f"{total} rows; age_s={age_s}")
        return total

    async def prune_audit_preview(self, *, age_s: float) -> int:
        return await (await self.backend()).audit_prune_preview(check_seconds("age_s", age_s))

    async def counts(self, queue: str | None = None) -> dict[str, int]:
        return await (await self.backend()).job_count_by_state(queue)

    async def counts_by_queue(self) -> dict[str, dict[str, int]]:
        return await (await self.backend()).job_count_by_queue()

    # -- queue and task controls ------------------------------------------------------------

    async def _known_queue(self, queue: str, create: bool) -> str:
        """``queue`` if something knows it: a task or schedule of this app, a settings row,
        or any job row (finished ones too); else, unless ``create``, ConfigurationError (a
        typo must not quietly set up a queue nothing uses)."""
        check_text("queue", queue)
        known = {t.queue for t in self._registry.tasks.values()}
        known |= {s.queue for s in self._registry.schedules.values() if s.queue}
        if create or queue in known or await (await self.backend()).queue_known(queue):
            return queue
        raise ConfigurationError(
            f"unknown queue {queue!r}: no task, job or setting names it (a typo?); to set up a "
            "new queue, pass --create (create=True from Python)"
        )

    async def queues(self) -> list[QueueInfo]:
        return await (await self.backend()).queue_list()

    async def queue_info(self, queue: str) -> QueueInfo:
        check_text("queue", queue)
        return await (await self.backend()).queue_info(queue)

    async def pause_queue(self, queue: str, *, who: str = "", create: bool = False) -> None:
        params = QueueSetPausedParams(await self._known_queue(queue, create), True)
        await (await self.backend()).queue_set_paused(params)
        await self._audit("pause queue", who, f"queue {queue}")

    async def resume_queue(self, queue: str, *, who: str = "", create: bool = False) -> None:
        params = QueueSetPausedParams(await self._known_queue(queue, create), False)
        await (await self.backend()).queue_set_paused(params)
        await self._audit("resume queue", who, f"queue {queue}")
        self._registry.wake_queues([queue])

    async def set_queue_limits(
        self,
        queue: str,
        *,
        max_depth: int | Kept | None = KEPT,
        max_running: int | Kept | None = KEPT,
        rate_per_s: float | Kept | None = KEPT,
        aging_s: float | Kept | None = KEPT,
        who: str = "",
        create: bool = False,
    ) -> None:
        given = {
            "max_depth": max_depth,
            "max_running": max_running,
            "rate_per_s": rate_per_s,
            "aging_s": aging_s,
        }
        changes = {name: value for name, value in given.items() if value is not KEPT}
        for name, value in changes.items():
            if value is not None:
                _QUEUE_LIMIT_CHECKS[name](name, value)
        limits = QueueSetLimitsParams(
            await self._known_queue(queue, create),
            max_depth=_set(max_depth),
            max_running=_set(max_running),
            rate_per_s=_set(rate_per_s),
            aging_s=_set(aging_s),
            given=frozenset(changes),
        )
        await (await self.backend()).queue_set_limits(limits)
        detail = " ".join(f"{name}={value}" for name, value in changes.items())
        await self._audit("set queue limits", who, f"queue {queue}", detail or "nothing changed")

    async def pause_task(
        self, task: str, *, for_s: float | None = None, reason: str = "", who: str = ""
    ) -> None:
        self._registry.get_task(task)
        if for_s is not None:
            check_seconds("for_s", for_s, open_=True)
        person = who or default_who()
        why = reason or f"paused by {person}"
        await (await self.backend()).task_pause(TaskPauseParams(task, why, for_s))
        detail = f"for {for_s} s; {why}" if for_s is not None else why
        await self._audit("pause task", person, f"task {task}", detail)

    async def resume_task(self, task: str, *, who: str = "") -> bool:
        self._registry.get_task(task)
        resumed = await (await self.backend()).task_resume(task)
        detail = "" if resumed else "was not paused"
        await self._audit("resume task", who, f"task {task}", detail)
        self._registry.wake_queues([self._registry.tasks[task].queue])
        return resumed

    async def task_pauses(self) -> list[TaskPause]:
        return await (await self.backend()).task_pauses()


def _prune_params(finished_age_s: float, dead_age_s: float, batch: int) -> JobPruneParams:
    return JobPruneParams(
        check_seconds("finished_age_s", finished_age_s),
        check_seconds("dead_age_s", dead_age_s),
        check_int("batch", batch, 1),
    )
