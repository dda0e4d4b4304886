"""The backend protocol: named storage operations, one method each (their params records
are in ``params.py``).

The worker, scheduler, CLI and tests ask a backend ``job_get_available(...)``; they never see
SQL or know which database they hold. PostgreSQL and SQLite implement the same operations under
the same names, and one conformance suite runs against both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from .._job import (
    AuditEntry,
    BlockedKey,
    ClaimedJob,
    Completion,
    CronRun,
    DeadGroup,
    JobOutcome,
    JobRecord,
    JobState,
    KeyLoad,
    QueueInfo,
    ReclaimedJob,
    SlotOutcome,
    StorageHold,
    TaskPause,
    WorkerInfo,
)
from .._job_log import JobLog
from .._workflow_records import (
    BatchInfo,
    JobLinks,
    LinkedJob,
    SignalReceipt,
    StoredSignal,
    WaitingJob,
    WorkflowGraph,
)
from .params import (
    AuditListParams,
    AuditPruneParams,
    AuditRecordParams,
    ClaimParams,
    CronSlotClaimParams,
    CronSlotsPruneSyncParams,
    CronSlotSyncParams,
    DeadActionParams,
    HotVacuum,
    JobActionParams,
    JobBusiestKeysParams,
    JobFindParams,
    JobHeartbeatManyParams,
    JobImportOutcomeParams,
    JobInsertManyParams,
    JobListParams,
    JobPruneParams,
    JobReclaimWorkerParams,
    JobStatsParams,
    JobStatsRows,
    QueueSetLimitsParams,
    QueueSetPausedParams,
    Rotation,
    StorageHoldParams,
    TaskPauseParams,
    WalCheckpoint,
    WorkerBeatParams,
)
from .workflow_params import (
    WorkflowAbortBatchParams,
    WorkflowAfterCompletionParams,
    WorkflowEnqueueParams,
    WorkflowEnqueueSyncParams,
    WorkflowGraphParams,
    WorkflowLinkedParams,
    WorkflowLinksParams,
    WorkflowOpenBatchParams,
    WorkflowSignalParams,
    WorkflowSignalTakeParams,
    WorkflowStepGetParams,
    WorkflowStepPutParams,
    WorkflowWaitPrepareParams,
)

if TYPE_CHECKING:
    from .workflow_plan import SweepResult

Clock = Callable[[], datetime]
"""A replacement for the database's now(), for tests that pin time."""

MAX_ERRORS_KEPT = 10
"""Each job keeps the errors of its last ten attempts; older ones are dropped."""


NEXT_RUN_PRIORITIES = 64
"""How many distinct pending priorities ``job_next_run_at`` looks at (each one an index
probe); a job of a lower priority still due sooner waits for the poll backstop."""

WAL_HELD_MIN_BYTES = 16 << 20
"""SQLite: the least write-ahead log a checkpoint could not copy back that counts as held
(four times the 4 MB SQLite's own checkpoints keep it under): below it a reader's open
transaction costs nothing worth a word."""


class Backend(Protocol):
    """Named operations on the job table. Every method is one round trip where it can be."""

    url: str
    supports_push: bool
    """True when ``listen`` delivers wake-ups from other processes (LISTEN/NOTIFY)."""
    vacuums_hot: bool
    """True when the hot rows' updates leave dead versions a worker vacuums (PostgreSQL's
    live partition, ``hot_vacuum``); SQLite's deletes and updates leave none to collect."""
    keeps_wal: bool
    """True when the database writes a log file that a worker checkpoints (SQLite's
    ``-wal``, ``wal_checkpoint``); PostgreSQL's server keeps its own."""
    inserts_here: bool
    """True when a sync enqueue may insert through this backend in the caller's own thread
    (it is then also an ``InsertsHere``; ``inserts_here(backend)`` narrows to it): SQLite,
    whose driver is synchronous, so ``task.enqueue()`` skips the hop to the app's loop and
    back. False: the drivers are async (PostgreSQL), so a sync enqueue goes through the
    app's loop. The enqueue path asks this instead of naming a dialect (the layer above
    storage never imports one)."""

    on_released: Callable[[set[str]], None] | None
    """Told the queues a workflow release made jobs pending in (a worker sets it to wake its
    own producer at once); None: nobody here to tell."""
    lanes: tuple[str, ...]
    """The lanes this database's workers serve (``("default",)`` unless an App's directory of
    several databases says otherwise; ``App.backend`` sets it): the services that act on every
    job of the database (claims, the lease sweep, a dead worker's release) run once a lane,
    each statement naming its lane."""
    max_payload_bytes: int
    """The most bytes a workflow release gives a child as the list of its parents' results
    (a chord's body): one over it is buried, ``dead`` with a PayloadTooLarge error, and never
    run. ``App.new_backend`` sets the App's ``max_payload_bytes``."""

    async def open(self, *, create: bool = False) -> None:
        """Connect. ``create``: the database may be made if it is missing (migrating only:
        a read or a worker must never leave an empty database behind)."""
        ...

    async def close(self) -> None: ...

    async def migrate(self) -> list[int]:
        """Apply every missing migration; return the versions applied."""
        ...

    async def database_number_on(self, connection: object) -> int | None:
        """The number of the database a caller's connection (asyncpg or psycopg async) is
        to, read in its transaction without failing it (None: not a numbered skiplock
        database): an enqueue in a caller's transaction checks it is the jobs' database."""
        ...

    def database_number_on_sync(self, connection: object) -> int | None:
        """``database_number_on`` on a caller's synchronous psycopg connection."""
        ...

    async def schema_version(self) -> tuple[int, int]:
        """(version in the database, version this code needs); 0 means no schema."""
        ...

    async def database_number(self, number: int) -> int:
        """This database's number among several (``skiplock._lanes``): ``number`` recorded if
        none is yet (a database numbered n > 0 then draws its job ids from ``n * ID_SPAN``),
        and the recorded number returned; the caller refuses a difference. SQLite serves
        one machine: its number is 0, and any other is a ConfigurationError."""
        ...

    async def job_insert_many(self, params: JobInsertManyParams) -> list[int]:
        """Insert jobs in one round trip and wake workers at commit; ids in input order.

        With ``params.connection`` (the caller's own async connection) the rows join the
        caller's transaction.
        """
        ...

    def job_insert_many_sync(self, params: JobInsertManyParams) -> list[int]:
        """The same on the caller's own synchronous connection (sqlite3, psycopg), which
        ``params.connection`` must name."""
        ...

    async def job_get_available(self, params: ClaimParams) -> list[ClaimedJob]:
        """Claim up to ``limit`` ready jobs atomically: running, attempt+1, leased.

        Skips paused queues and tasks, queues with global limits (see below) and jobs with a
        concurrency key (``job_get_available_keyed``).
        """
        ...

    async def job_get_available_keyed(self, params: ClaimParams) -> list[ClaimedJob]:
        """Claim up to ``limit`` ready jobs with a concurrency key, none past its key's
        ``key_limit`` of running jobs (counted everywhere, under the key's lock, so that
        concurrent claimers cannot exceed it), taking from keys in turn: priority first, then
        the key's turn, then age. Each call's walk over the keys starts after where this
        backend's previous one (for the same queues) stopped. A limited queue's keyed jobs
        go through ``job_get_available_limited``."""
        ...

    async def job_get_available_limited(self, params: ClaimParams) -> list[ClaimedJob]:
        """Claim from one queue (``params.queues``, exactly one) with a global
        ``max_running`` or rate, holding its settings row locked so that concurrent claimers
        anywhere cannot exceed either."""
        ...

    async def queue_limited(self) -> list[str]:
        """Queues that must be claimed through ``job_get_available_limited``."""
        ...

    async def job_next_run_at(self, lookback_s: float = 0.0, lane: str = "default") -> float | None:
        """Seconds until the earliest pending job due after ``lookback_s`` ago (None: there
        is none), by the database's clock, so an idle worker can wake when it comes due. The
        worker passes how long ago its short claim began: a job that came due since then
        answers <= 0 (claim again now), not the next one after it. It reads at
        most ``NEXT_RUN_PRIORITIES`` distinct priorities (a loose scan of the pending index):
        past them the answer may be late, never early. Of ``lane``'s jobs alone."""
        ...

    async def job_ready_exists(self, queues: tuple[str, ...] | None, lane: str = "default") -> bool:
        """Whether the ordinary claim of ``queues`` (None: any) has a ready job to take now
        (pending, due, its queue and task not paused, its queue not limited), whether or not
        another session holds its row: PostgreSQL's claim skips held rows, so a claim that
        came up short proves nothing is left only where this says so. Of ``lane``'s jobs."""
        ...

    async def job_busiest_keys(self, params: JobBusiestKeysParams) -> list[KeyLoad]:
        """The ``limit`` concurrency keys with the most running jobs, then the most ready, of
        one queue and/or task (None: any): each key's live jobs counted (reads every live
        keyed job, never history)."""
        ...

    async def job_blocked_keys(self, limit: int) -> list[BlockedKey]:
        """The ``limit`` ordered keys a dead job holds, the oldest dead job first."""
        ...

    async def queue_list(self) -> list[QueueInfo]:
        """Every queue with settings or live jobs; no finished row is read."""
        ...

    async def queue_info(self, queue: str) -> QueueInfo:
        """One queue's settings and live counts; no finished row is read."""
        ...

    async def queue_known(self, queue: str) -> bool:
        """Whether any job row (of any state, history too) or a settings row names ``queue``."""
        ...

    async def queue_set_paused(self, params: QueueSetPausedParams) -> None: ...

    async def queue_set_limits(self, params: QueueSetLimitsParams) -> None:
        """Set all three (None lifts one)."""
        ...

    async def task_pause(self, params: TaskPauseParams) -> None: ...

    async def task_resume(self, task: str) -> bool:
        """False if the task was not paused."""
        ...

    async def task_pauses(self) -> list[TaskPause]: ...

    async def audit_record(self, params: AuditRecordParams) -> None: ...

    async def audit_list(self, params: AuditListParams) -> list[AuditEntry]:
        """The audit trail, newest first; ``before_id`` pages by keyset."""
        ...

    async def audit_prune(self, params: AuditPruneParams) -> int:
        """Delete one batch (at most ``batch``) of audit entries older than ``age_s`` seconds
        by the database's clock, oldest first; how many went (0: none left to delete)."""
        ...

    async def audit_prune_preview(self, age_s: float) -> int:
        """How many audit entries are older than ``age_s`` seconds (``audit_prune``'s rule)."""
        ...

    async def job_set_state_if_running_many(self, completions: Sequence[Completion]) -> list[int]:
        """Apply outcomes to rows still running under their lease token; return those ids."""
        ...

    async def job_get(self, job_id: int) -> JobRecord:
        """One job, or JobNotFound."""
        ...

    async def job_logs_write(self, logs: Sequence[JobLog]) -> None:
        """Keep these attempts' logs (``job_log=True``), one row an attempt; an attempt's
        log written again (a released attempt runs again under its number) is replaced."""
        ...

    async def job_logs_read(self, job_id: int) -> list[JobLog]:
        """The logs a job's attempts kept, by attempt ([] for none)."""
        ...

    async def job_logs_prune(self, batch: int) -> int:
        """Delete up to ``batch`` logs whose job is gone (pruned, deleted); how many went
        (0: none left)."""
        ...

    async def job_outcome_many(self, job_ids: Sequence[int]) -> list[JobOutcome]:
        """Where each of these jobs stands (ids with no row are left out): one query for
        however many handles a process awaits."""
        ...

    async def job_count_by_state(self, queue: str | None = None) -> dict[str, int]: ...

    async def job_count_by_queue(self) -> dict[str, dict[str, int]]:
        """``job_count_by_state`` of every queue with a job, in one reading."""
        ...

    async def job_retry(self, params: JobActionParams) -> bool:
        """Requeue a finished job with its attempts reset; False if it was not final."""
        ...

    async def job_cancel(self, params: JobActionParams) -> JobState:
        """Cancel a pending job, or flag a running one for its worker; the state after.

        A finished job is left alone and its state returned; an unknown id is JobNotFound.
        """
        ...

    async def job_cancel_requested(self, job_ids: Sequence[int]) -> list[int]:
        """Of these running jobs, the ones a person asked to cancel."""
        ...

    async def job_list(self, params: JobListParams) -> list[JobRecord]:
        """Jobs in ``state`` (any if None) matching ``where``, newest first."""
        ...

    async def job_count(self, params: JobListParams) -> int:
        """How many jobs ``job_list`` would find without its limit (a bulk action's preview)."""
        ...

    async def job_count_states(self, params: JobListParams) -> dict[str, int]:
        """``job_count`` per state, in one pass (states with no job left out)."""
        ...

    async def job_find(self, params: JobFindParams) -> list[JobRecord]:
        """Jobs whose unique key or correlation id is exactly ``text``, newest first."""
        ...

    async def job_dead_groups(self, limit: int) -> list[DeadGroup]:
        """Dead jobs grouped by task and last error message, the largest groups first."""
        ...

    async def job_requeue_dead(self, params: DeadActionParams) -> list[int]:
        """Dead jobs matching ``where`` back to pending, attempts reset; their ids."""
        ...

    async def job_discard_dead(self, params: DeadActionParams) -> list[int]:
        """Dead jobs matching ``where`` to cancelled (kept until retention); their ids."""
        ...

    async def job_prune(self, params: JobPruneParams) -> int:
        """Delete one batch of rows past their retention; how many went. PostgreSQL drops
        whole history partitions past it first, and counts their rows in."""
        ...

    async def storage_upkeep(self) -> list[str]:
        """Keep the storage's own structures ahead of time (PostgreSQL: the history
        partitions of today and the next days); the names made. SQLite has none to keep."""
        ...

    async def hot_vacuum(self, min_dead: int) -> HotVacuum | None:
        """Vacuum the hot rows if at least ``min_dead`` dead versions wait there (by the
        server's statistics), skipping it while another session vacuums them; None when
        fewer wait (and always on SQLite)."""
        ...

    async def rotate_live(self, min_bytes: int) -> Rotation | None:
        """One turn of the live jobs' generations (PostgreSQL): a new one once the newest
        holds ``min_bytes``, the old ones' leftover live jobs moved aside and their tables
        detached concurrently (out of the claims' sight, dead versions and all, whatever a
        reader holds), then dropped once their readers are gone. None: another session is
        rotating (and always on SQLite)."""
        ...

    async def storage_hold(self, params: StorageHoldParams) -> StorageHold | None:
        """Who holds the storage's upkeep of kind ``hold`` (``HOLD_KINDS``) back now, and at
        what cost; None: nothing does (and always for a kind this database does not have).
        ``lock`` (PostgreSQL): the other sessions (and prepared transactions) holding a
        granted lock on ``relations`` (empty: the live jobs' ring segments) whose transaction
        is ``min_age_s`` old; ``horizon`` (PostgreSQL): those holding the MVCC horizon that far
        back, oldest first; ``wal`` (SQLite): the write-ahead log when a passive checkpoint
        cannot copy WAL_HELD_MIN_BYTES of it back."""
        ...

    async def wal_checkpoint(self, truncate_above: int) -> WalCheckpoint | None:
        """SQLite: a passive checkpoint of the write-ahead log, never waiting on a reader;
        when it completed and the file is over ``truncate_above`` bytes, a ``TRUNCATE`` one
        too (it waits at most 100 ms), so the file shrinks back from its high-water size.
        None on a database without one (PostgreSQL)."""
        ...

    async def job_prune_preview(self, params: JobPruneParams) -> dict[str, int]:
        """How many rows ``job_prune`` would delete now (batches aside), by state; the same
        condition, so a dry run counts what the real run's rule takes."""
        ...

    async def warm_up(self) -> None:
        """Open the sessions a worker uses and prepare its hot statements, touching no row,
        so the first jobs do not pay for connecting and planning."""
        ...

    async def job_reclaim_expired(
        self, into: list[ReclaimedJob] | None = None, lane: str = "default"
    ) -> list[int]:
        """Return ``lane``'s running rows whose lease expired to pending (dead if attempts
        are spent); their ids, and with ``into``, each row's details appended to it (for log
        events)."""
        ...

    async def job_reclaim_worker(self, params: JobReclaimWorkerParams) -> list[int]:
        """``job_reclaim_expired`` for every lease of one worker (``Worker.id``, its lease
        token prefix), expired or not: a supervisor saw that worker's process exit, or another
        worker saw it is gone (``_observe.liveness``). Each job's error reads ``worker
        <locked_by> <why>``."""
        ...

    async def job_heartbeat_many(self, params: JobHeartbeatManyParams) -> list[tuple[int, str]]:
        """Extend the leases of (id, token) pairs still running; return the pairs still held.

        Pairs, not ids: a worker that re-claimed its own lapsed job holds it under two tokens,
        and only the pair tells the lost attempt from the new one."""
        ...

    async def cron_slot_claim(self, params: CronSlotClaimParams) -> tuple[SlotOutcome, int | None]:
        """Claim (schedule, slot) under its unique key and enqueue ``job`` in one transaction.

        A failed enqueue rolls the claim back, so the slot can be tried again.
        """
        ...

    def cron_slot_claim_sync(self, params: CronSlotSyncParams) -> bool:
        """Claim (schedule, slot) on ``params.connection`` and, if this claim took it, run
        ``params.enqueue`` and record its job; True if taken here. Nothing is committed: the
        caller's transaction decides (a failed enqueue rolls the claim back)."""
        ...

    def cron_slots_prune_sync(self, params: CronSlotsPruneSyncParams) -> int:
        """``cron_slots_prune`` on the caller's own synchronous connection."""
        ...

    def job_import_outcome_sync(self, params: JobImportOutcomeParams) -> bool:
        """Give a pending job just inserted (``job_insert_many_sync``) a finished outcome;
        False if it was no longer pending."""
        ...

    async def cron_last_slots(self) -> dict[str, datetime]:
        """The most recent slot claimed for each schedule."""
        ...

    async def cron_last_runs(self) -> list[CronRun]:
        """Each schedule's most recent slot and the job it enqueued (None if skipped)."""
        ...

    async def cron_slots_prune(self, before: datetime) -> int:
        """Delete slot rows older than ``before``; return how many."""
        ...

    async def job_stats(self, params: JobStatsParams) -> JobStatsRows:
        """One consistent reading of the health numbers' rows (see ``_observe/stats.py``)."""
        ...

    async def worker_beat(self, params: WorkerBeatParams) -> None:
        """Upsert a worker's registry row, its heartbeat the database's now."""
        ...

    async def worker_delete(self, worker_id: str) -> None: ...

    async def worker_prune(self, silent_s: float) -> int:
        """Forget workers whose last beat is more than ``silent_s`` old; how many went."""
        ...

    async def worker_list(self) -> list[WorkerInfo]: ...

    # -- workflows (workflow_flows.py; docs/guides/workflows.md) --------------------------

    async def workflow_enqueue(self, params: WorkflowEnqueueParams) -> list[int]:
        """Write a workflow's jobs, edges and waits in one transaction (the caller's, if
        ``connection``); the ids in plan order. UnknownParent, WorkflowCycle, BatchClosed."""
        ...

    def workflow_enqueue_sync(self, params: WorkflowEnqueueSyncParams) -> list[int]:
        """The same in the transaction of the caller's own synchronous connection (sqlite3,
        psycopg), which must be given."""
        ...

    async def workflow_open_batch(self, params: WorkflowOpenBatchParams) -> int:
        """A new open batch, its callbacks written waiting on its gate; its id."""
        ...

    async def workflow_close_batch(self, batch_id: int) -> bool:
        """Close a batch (its callbacks run once every member finished); False if closed."""
        ...

    async def workflow_release(self, parents: Sequence[int]) -> list[int]:
        """Resolve finished parents' edges now; the children released to pending."""
        ...

    async def workflow_after_completion(self, params: WorkflowAfterCompletionParams) -> list[int]:
        """A completion's follow-up (both are done inside the completion where possible)."""
        ...

    async def workflow_sweep(self) -> SweepResult:
        """Releases a crash left undone, and parked waits past their timeout."""
        ...

    async def workflow_expire_waits(self) -> list[int]:
        """Parked waits past their timeout run again now (the timeout recorded); their ids."""
        ...

    async def workflow_next_wait_timeout(self) -> float | None:
        """Seconds until the first parked wait times out (<= 0: one is due); None if none."""
        ...

    async def workflow_abort_batch(self, params: WorkflowAbortBatchParams) -> bool:
        """Close an open batch as aborted (its block raised): its callbacks and its members
        that never started cancelled with ``error_json``; False if it was closed already."""
        ...

    async def workflow_wait_prepare(self, params: WorkflowWaitPrepareParams) -> bool:
        """Record the signal a running job is about to park on (entry ``seq`` of its name's
        mailbox); False if its lease is gone."""
        ...

    async def workflow_signal(self, params: WorkflowSignalParams) -> SignalReceipt:
        """Append a signal from ``who`` to its name's mailbox (none for a finished job, whose
        row is left alone; JobNotFound if no such job), resume the job if it waits for it,
        and record it in the job's audit trail as ``who``'s. MailboxFull, nothing written,
        if the job keeps ``kept_most`` signals no wait took yet."""
        ...

    async def workflow_signal_take(self, params: WorkflowSignalTakeParams) -> StoredSignal | None:
        """Entry ``seq`` of the job's mailbox ``name`` (a signal or a timeout), marked taken
        (it no longer counts towards ``kept_most``); None if it has not come."""
        ...

    async def workflow_step_get(self, params: WorkflowStepGetParams) -> tuple[bool, str | None]:
        """(found, result JSON) of the ``seq``-th durable step named ``name``."""
        ...

    async def workflow_step_put(self, params: WorkflowStepPutParams) -> bool:
        """Store a step's result under the lease; False if the lease is gone (or stored)."""
        ...

    async def workflow_parent_results(
        self, job_id: int
    ) -> list[tuple[int, str | None, str | None]]:
        """(parent id, its final state or None while open, result JSON) in order."""
        ...

    async def workflow_links(self, params: WorkflowLinksParams) -> JobLinks:
        """A job's parents (the first ``parents_limit``, in order, and every one counted by
        state), children (the first ``children_limit``), batch and wait."""
        ...

    async def workflow_linked(self, params: WorkflowLinkedParams) -> list[LinkedJob]:
        """A page of a job's parents (or children) by id: at most ``limit`` after id
        ``after`` (0: from the first)."""
        ...

    async def workflow_batch_info(self, batch_id: int) -> BatchInfo:
        """A batch's members per state (JobNotFound if no such batch)."""
        ...

    async def workflow_waiting(self, limit: int) -> list[WaitingJob]:
        """The first ``limit`` waiting jobs, oldest id first."""
        ...

    async def workflow_graph(self, params: WorkflowGraphParams) -> WorkflowGraph:
        """The jobs linked to ``job_id`` (at most ``most``) and their edges."""
        ...

    async def workflow_prune(self, most: int) -> int:
        """Delete what workflows left of jobs now gone (steps, signals, edges, waits, batch
        members, empty closed batches), at most ``most`` rows a table; how many."""
        ...

    def listen(self, on_wake: Callable[[str], None]) -> AbstractAsyncContextManager[asyncio.Event]:
        """While entered, call ``on_wake(queue)`` when another process enqueues."""
        ...

    def listen_done(
        self, on_done: Callable[[list[int] | None], None]
    ) -> AbstractAsyncContextManager[asyncio.Event]:
        """While entered, call ``on_done(ids)`` when jobs finish anywhere (None: the database
        cannot say which, so any may have); the yielded event is set if the watch is lost."""
        ...
