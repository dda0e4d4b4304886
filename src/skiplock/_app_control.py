"""``Operations``: what a person drives through ``App``: inspecting jobs, retrying and
cancelling them, the dead-letter actions, the audit trail, and the queue and task controls
stored in the database (so every producer and worker agrees).

A part the App composes, over the backend and the ``Registry`` (the tasks and queues it
knows, the wake-ups after a requeue); it never sees the App. The public methods' documentation
is on ``App``, which delegates to these one to one."""

from __future__ import annotations

import dataclasses
import enum
import getpass
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from . import _app_merged as merged
from ._app_databases import Databases
from ._backends import Backend
from ._backends.params import (
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
from ._job_log import JobLog
from ._lanes import DEFAULT, ID_SPAN
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
    """The person-driven operations of one app, over its databases and its registry.

    A job id acts on the database it names; a read or a filter without ids goes over every
    database (or the one ``database`` names), in the order their ids run."""

    def __init__(self, backend: Databases, registry: Registry) -> None:
        self.backend = backend
        self._registry = registry

    async def _each(
        self, database: str | None, act: Callable[[Backend], Awaitable[T]]
    ) -> list[tuple[str, T]]:
        """``act`` on each database chosen (``Databases.chosen``), in turn."""
        return [
            (name, await act(await self.backend(name))) for name in self.backend.chosen(database)
        ]

    # -- the audit trail ----------------------------------------------------------------------

    async def record_action(
        self, what: str, *, who: str = "", target: str = "", detail: str = ""
    ) -> None:
        check_text("what", what)
        for name, value in (("who", who), ("target", target), ("detail", detail)):
            if value:
                check_text(name, value)
        await self._audit(what, who, target, detail)

    async def _audit(
        self, what: str, who: str, target: str, detail: str = "", database: str = DEFAULT
    ) -> None:
        """``record_action`` for skiplock's own operations: a 4000-character queue name or
        filter is cut to fit, never a refusal of an action that already happened."""
        fit = [
            v.replace("\x00", "")[:MAX_TEXT_CHARS]
            for v in (what, who or default_who(), target, detail)
        ]
        params = AuditRecordParams(fit[1], fit[0], fit[2], fit[3])
        await (await self.backend(database)).audit_record(params)

    async def audit_trail(
        self, *, limit: int = 100, before_id: int | None = None, database: str | None = None
    ) -> list[AuditEntry]:
        check_int("limit", limit, 1, 10_000)
        if before_id is not None:
            check_int("before_id", before_id, 1, 2**63 - 1)
        return await merged.audit_trail(self.backend, limit, before_id, database)

    # -- jobs and dead letters ----------------------------------------------------------------

    async def get_job(self, job_id: int) -> JobRecord:
        found = await (await self.backend.of_id(job_id)).job_get(job_id)
        return self.backend.named([found])[0]

    async def job_logs(self, job_id: int) -> list[JobLog]:
        return await (await self.backend.of_id(job_id)).job_logs_read(job_id)

    async def release_worker(self, worker_id: str) -> list[int]:
        if not isinstance(worker_id, str) or not worker_id.strip():
            raise ConfigurationError(f"worker_id must be a worker's id (got {worker_id!r})")

        async def release(backend: Backend) -> list[int]:
            return [
                job_id
                for lane in backend.lanes
                for job_id in await backend.job_reclaim_worker(
                    JobReclaimWorkerParams(worker_id, lane=lane)
                )
            ]

        done = await self._each(None, release)
        return [job_id for _, ids in done for job_id in ids]

    async def retry_job(self, job_id: int, *, who: str = "") -> bool:
        database = self.backend.name_of_id(job_id)
        try:
            backend = await self.backend(database)
            done = await backend.job_retry(JobActionParams(job_id, _who(who)))
        except DuplicateJob as exc:
            raise DuplicateJob(
                f"job {job_id} was not retried: another job holds its unique key"
            ) from exc
        await self._audit("retry", who, f"job {job_id}", "" if done else "not finished", database)
        if done:
            job = await self.get_job(job_id)
            self._registry.wake_queues([job.queue])
        return done

    async def cancel_job(self, job_id: int, *, who: str = "") -> JobState:
        database = self.backend.name_of_id(job_id)
        backend = await self.backend(database)
        state = await backend.job_cancel(JobActionParams(job_id, _who(who)))
        await self._audit("cancel", who, f"job {job_id}", state.value, database)
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
        database: str | None = None,
    ) -> list[JobRecord]:
        if before_id is not None:
            check_int("before_id", before_id, 1, 2**63 - 1)
        where = where or JobFilter()
        parts = self._parts(where, database)
        # ids run with the databases' numbers: database by database is the order of the ids
        if not oldest_first:
            parts.reverse()
        found: list[JobRecord] = []
        for name, part in parts:
            if before_id is not None and self._before(name, before_id, oldest_first):
                continue
            left = where.limit - len(found)
            if found and left <= 0:  # a limit the backend refuses is its to refuse, as ever
                break
            params = JobListParams(
                dataclasses.replace(part, limit=left), state, before_id, oldest_first
            )
            found += await (await self.backend(name)).job_list(params)
        return self.backend.named(found)

    def _parts(self, where: JobFilter, database: str | None) -> list[tuple[str, JobFilter]]:
        """The databases a filter reads, each with its part of the filter: the named ids
        split by the database each names (a database none of them names is not read)."""
        names = self.backend.chosen(database)
        if where.ids is None:
            return [(name, where) for name in names]
        split = self.backend.split(where.ids)
        return [(n, dataclasses.replace(where, ids=split[n])) for n in names if n in split]

    def _before(self, database: str, before_id: int, oldest_first: bool) -> bool:
        """Whether paging past ``before_id`` leaves nothing of ``database``'s ids."""
        if not self.backend.several:
            return False
        first = self.backend.first_id(database)
        if oldest_first:  # ids after before_id
            return before_id >= first + ID_SPAN - 1
        return before_id <= first

    async def count_jobs(
        self,
        state: JobState | None = None,
        where: JobFilter | None = None,
        *,
        database: str | None = None,
    ) -> int:
        total = 0
        for name, part in self._parts(where or JobFilter(), database):
            total += await (await self.backend(name)).job_count(JobListParams(part, state))
        return total

    async def count_jobs_by_state(
        self, where: JobFilter | None = None, *, database: str | None = None
    ) -> dict[str, int]:
        total: dict[str, int] = {}
        for name, part in self._parts(where or JobFilter(), database):
            counts = await (await self.backend(name)).job_count_states(JobListParams(part))
            _add(total, counts)
        return total

    async def find_jobs(
        self, text: str, *, limit: int = 50, database: str | None = None
    ) -> list[JobRecord]:
        check_int("limit", limit, 1, 10_000)
        if not isinstance(text, str) or len(text) > 4000 or "\x00" in text:
            raise ConfigurationError(f"find_jobs: text {text!r:.80}: a string, at most 4000 chars")
        text = text.strip()
        names = self.backend.chosen(database)
        if not text:
            return []
        found: list[JobRecord] = []
        if text.isascii() and text.isdigit() and 0 < int(text) <= 2**63 - 1:
            try:
                where = JobFilter(ids=(int(text),), limit=1)
                found = await self.list_jobs(None, where, database=database)
            except ConfigurationError:  # an id of no database here: a search finds nothing
                found = []
        # newest first, as list_jobs: ids run with the databases' numbers, so the last first
        for name in reversed(names):
            if len(found) >= limit:
                break
            more = await (await self.backend(name)).job_find(JobFindParams(text, limit))
            seen = {j.id for j in found}
            found += [j for j in more if j.id not in seen]
        return self.backend.named(found[:limit])

    async def dead_groups(
        self, limit: int = 200, *, database: str | None = None
    ) -> list[DeadGroup]:
        check_int("limit", limit, 1)
        return await merged.dead_groups(self.backend, limit, database)

    async def cron_last_runs(self, *, database: str | None = None) -> list[CronRun]:
        return await merged.cron_last_runs(self.backend, database)

    async def requeue_dead(
        self, where: JobFilter, *, who: str = "", database: str | None = None
    ) -> list[int]:
        ids = await self._dead_action("requeue dead", where, who, database)
        if ids:
            self._registry.wake_queues([where.queue] if where.queue else ["*"])
        return ids

    async def discard_dead(
        self, where: JobFilter, *, who: str = "", database: str | None = None
    ) -> list[int]:
        return await self._dead_action("discard dead", where, who, database)

    async def _dead_action(
        self, what: str, where: JobFilter, who: str, database: str | None
    ) -> list[int]:
        """Requeue or discard the dead jobs ``list_jobs(DEAD, where, oldest_first=True,
        database=database)`` shows: database by database in the ids' order, each picking at
        most what the limit leaves after those picked before (never more in total)."""
        _checked(where)
        person = _who(who)
        parts = self._parts(where, database)
        done: list[int] = []
        left = where.limit
        for name, part in parts:
            if left <= 0:
                break
            backend = await self.backend(name)
            part = dataclasses.replace(part, limit=left)
            picked = left
            if len(parts) > 1:  # what this database's part of the preview holds
                picked = min(left, await backend.job_count(JobListParams(part, JobState.DEAD)))
            params = DeadActionParams(part, person)
            if what == "requeue dead":
                ids = await backend.job_requeue_dead(params)
            else:
                ids = await backend.job_discard_dead(params)
            await self._audit(what, who, _dead(part), _ids(ids), name)
            done += ids
            left -= max(picked, len(ids))
        return done

    async def prune(
        self,
        *,
        finished_age_s: float,
        dead_age_s: float,
        batch: int = 1000,
        who: str = "",
        database: str | None = None,
    ) -> int:
        params = _prune_params(finished_age_s, dead_age_s, batch)
        total = 0
        for name in self.backend.chosen(database):
            backend = await self.backend(name)
            deleted_here = 0
            while (deleted := await backend.job_prune(params)) > 0:
                deleted_here += deleted
            while await backend.workflow_prune(batch) > 0:  # what workflows left behind
                pass
            while await backend.job_logs_prune(batch) > 0:  # the logs of the jobs gone
                pass
            ages = f"finished_age_s={finished_age_s} dead_age_s={dead_age_s}"
            await self._audit("prune", who, "jobs", f"{deleted_here} rows; {ages}", name)
            total += deleted_here
        return total

    async def prune_preview(
        self, *, finished_age_s: float, dead_age_s: float, database: str | None = None
    ) -> dict[str, int]:
        params = _prune_params(finished_age_s, dead_age_s, 1)
        total: dict[str, int] = {}
        for _, counts in await self._each(database, lambda b: b.job_prune_preview(params)):
            _add(total, counts)
        return total

    async def prune_audit(
        self, *, age_s: float, batch: int = 1000, who: str = "", database: str | None = None
    ) -> int:
        age_s, batch = check_seconds("age_s", age_s), check_int("batch", batch, 1)
        total = 0
        for name in self.backend.chosen(database):
            backend = await self.backend(name)
            here = 0
            while (deleted := await backend.audit_prune(AuditPruneParams(age_s, batch))) > 0:
                here += deleted
            detail = f"{here} rows; age_s={age_s}"
            await self._audit("prune audit trail", who, "audit trail", detail, name)
            total += here
        return total

    async def prune_audit_preview(self, *, age_s: float, database: str | None = None) -> int:
        age_s = check_seconds("age_s", age_s)
        counted = await self._each(database, lambda b: b.audit_prune_preview(age_s))
        return sum(n for _, n in counted)

    async def counts(self, queue: str | None = None) -> dict[str, int]:
        total: dict[str, int] = {}
        for _, counts in await self._each(None, lambda b: b.job_count_by_state(queue)):
            _add(total, counts)
        return total

    async def counts_by_queue(self, *, database: str | None = None) -> dict[str, dict[str, int]]:
        total: dict[str, dict[str, int]] = {}
        for _, by_queue in await self._each(database, lambda b: b.job_count_by_queue()):
            for queue, counts in by_queue.items():
                _add(total.setdefault(queue, {}), counts)
        return total

    # -- queue and task controls ------------------------------------------------------------

    async def _known_queue(self, queue: str, create: bool) -> str:
        """``queue`` if something knows it: a task or schedule of this app, a settings row,
        or any job row (finished ones too); else, unless ``create``, ConfigurationError (a
        typo must not quietly set up a queue nothing uses)."""
        check_text("queue", queue)
        known = {t.queue for t in self._registry.tasks.values()}
        known |= {s.queue for s in self._registry.schedules.values() if s.queue}
        if create or queue in known:
            return queue
        failed: Exception | None = None
        for name in self.backend.chosen(None):  # known in any database will do
            try:
                if await (await self.backend(name)).queue_known(queue):
                    return queue
            except Exception as exc:
                if not self.backend.several:
                    raise
                failed = failed or exc
        if failed is not None:  # "unknown" cannot be said of a database not asked
            raise failed
        raise ConfigurationError(
            f"unknown queue {queue!r}: no task, job or setting names it (a typo?); to set up a "
            "new queue, pass --create (create=True from Python)"
        )

    async def queues(self, *, database: str | None = None) -> list[QueueInfo]:
        """Every database's queues (or ``database``'s), each naming its database."""
        listed = await self._each(database, lambda b: b.queue_list())
        return [dataclasses.replace(q, database=name) for name, part in listed for q in part]

    async def queue_info(self, queue: str, *, database: str = DEFAULT) -> QueueInfo:
        check_text("queue", queue)
        self.backend.chosen(database)
        info = await (await self.backend(database)).queue_info(queue)
        return dataclasses.replace(info, database=database)

    async def pause_queue(
        self, queue: str, *, who: str = "", create: bool = False, database: str | None = None
    ) -> None:
        await self._set_paused(queue, True, who, create, database)

    async def resume_queue(
        self, queue: str, *, who: str = "", create: bool = False, database: str | None = None
    ) -> None:
        await self._set_paused(queue, False, who, create, database)
        self._registry.wake_queues([queue])

    async def _set_paused(
        self, queue: str, paused: bool, who: str, create: bool, database: str | None
    ) -> None:
        """Written to every database (or ``database``): a queue's jobs may be in any."""
        params = QueueSetPausedParams(await self._known_queue(queue, create), paused)
        for name in self.backend.chosen(database):
            await (await self.backend(name)).queue_set_paused(params)
            what = "pause queue" if paused else "resume queue"
            await self._audit(what, who, f"queue {queue}", "", name)

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
        database: str | None = None,
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
        detail = " ".join(f"{name}={value}" for name, value in changes.items())
        for name in self.backend.chosen(database):
            await (await self.backend(name)).queue_set_limits(limits)
            target = f"queue {queue}"
            await self._audit("set queue limits", who, target, detail or "nothing changed", name)

    async def pause_task(
        self, task: str, *, for_s: float | None = None, reason: str = "", who: str = ""
    ) -> None:
        self._registry.get_task(task)
        if for_s is not None:
            check_seconds("for_s", for_s, open_=True)
        person = who or default_who()
        why = reason or f"paused by {person}"
        detail = f"for {for_s} s; {why}" if for_s is not None else why
        for name in self.backend.chosen(None):  # its jobs may be in any database
            await (await self.backend(name)).task_pause(TaskPauseParams(task, why, for_s))
            await self._audit("pause task", person, f"task {task}", detail, name)

    async def resume_task(self, task: str, *, who: str = "") -> bool:
        self._registry.get_task(task)
        resumed = False
        for name in self.backend.chosen(None):
            here = await (await self.backend(name)).task_resume(task)
            detail = "" if here else "was not paused"
            await self._audit("resume task", who, f"task {task}", detail, name)
            resumed = resumed or here
        self._registry.wake_queues([self._registry.tasks[task].queue])
        return resumed

    async def task_pauses(self, *, database: str | None = None) -> list[TaskPause]:
        listed = await self._each(database, lambda b: b.task_pauses())
        return [dataclasses.replace(p, database=name) for name, part in listed for p in part]


def _add(total: dict[str, int], counts: dict[str, int]) -> None:
    """Add one database's counts by state to ``total``."""
    for key, n in counts.items():
        total[key] = total.get(key, 0) + n


def _prune_params(finished_age_s: float, dead_age_s: float, batch: int) -> JobPruneParams:
    return JobPruneParams(
        check_seconds("finished_age_s", finished_age_s),
        check_seconds("dead_age_s", dead_age_s),
        check_int("batch", batch, 1),
    )
