"""SQLite's typed statement registry: one field per statement name in ``queries/*.sql``.

Every statement SQLite runs is whole text in a ``.sql`` file of this package
(``sql_files.load_statements``), loaded once at import; ``STATEMENTS.JOB_GET`` is the text of
``-- name: JOB_GET``. A name in a file without a field here, or a field without a statement,
fails at import (``Statements(**loaded)``). SQLite has no schema to fill in: its texts are
used as written.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..sql_files import fill, load_statements, repeat

_LIVE = "('pending', 'running')"
"""The live states (JobState.live()), as every statement names them after the migrations (a
migration's text is history and keeps its own)."""
_FINAL = "('succeeded', 'cancelled', 'dead')"
"""The final states (JobState.final())."""


@dataclass(frozen=True, slots=True)
class Statements:
    """Every named statement of ``queries/*.sql``."""

    AUDIT_RECORD: str
    AUDIT_LIST: str
    AUDIT_PRUNE: str
    AUDIT_PRUNE_PREVIEW: str
    JOB_GET_AVAILABLE: str
    JOB_CLAIM_IDS: str
    JOB_READY_EXISTS: str
    JOB_NEXT_RUN_AT: str
    JOB_GET_AVAILABLE_AGED: str
    JOB_GET_AVAILABLE_IN_QUEUES: str
    JOB_SET_STATE_IF_RUNNING_MANY: str
    JOB_SET_STATE_KEEPING_RESULT: str
    JOB_DELETE_MOVED: str
    JOB_RECLAIM_EXPIRED: str
    JOB_RECLAIM_WORKER: str
    JOB_HEARTBEAT_MANY: str
    JOB_CANCEL_REQUESTED: str
    CRON_SLOT_INSERT: str
    CRON_SLOT_INSERT_AT: str
    CRON_PREVIOUS_RUN_LIVE: str
    CRON_SLOT_SET_OUTCOME: str
    CRON_LAST_SLOTS: str
    CRON_LAST_RUNS: str
    CRON_SLOTS_PRUNE: str
    TRANSACTION_BEGIN_IMMEDIATE: str
    TRANSACTION_BEGIN_DEFERRED: str
    TRANSACTION_BEGIN_AS: str
    TRANSACTION_COMMIT: str
    TRANSACTION_ROLLBACK: str
    WORKFLOW_SAVEPOINT: str
    WORKFLOW_SAVEPOINT_ROLLBACK: str
    WORKFLOW_SAVEPOINT_RELEASE: str
    PRAGMA_BUSY_TIMEOUT: str
    PRAGMA_JOURNAL_WAL: str
    PRAGMA_SYNCHRONOUS: str
    PRAGMA_SCHEMA_VERSION: str
    PRAGMA_SCHEMA_VERSION_SET: str
    PRAGMA_WRITABLE_SCHEMA_ON: str
    PRAGMA_WRITABLE_SCHEMA_OFF: str
    SCHEMA_TABLE_SQL_REPLACE: str
    WAL_CHECKPOINT_PASSIVE: str
    WAL_CHECKPOINT_TRUNCATE: str
    PAGE_SIZE: str
    JOB_INSERT: str
    JOB_INSERT_ONE: str
    JOB_INSERT_UNIQUE: str
    QUEUE_DEPTH_LIMIT: str
    LAST_INSERT_ID: str
    JOB_IMPORT_OUTCOME: str
    JOB_INSERT_ROWS: str
    JOB_INSERT_ROW: str
    DAY_TABLES: str
    TABLE_EXISTS: str
    TABLE_INFO: str
    DAY_ADD_COLUMN: str
    VIEW_DROP: str
    VIEW_CREATE: str
    VIEW_BRANCH: str
    VIEW_INSERT_TRIGGER: str
    VIEW_INSERT_VALUE: str
    VIEW_INSERT_VALUE_OR_DEFAULT: str
    VIEW_SET_COLUMN: str
    VIEW_UPDATE_TRIGGER: str
    VIEW_UPDATE_LIVE: str
    VIEW_UPDATE_DAY: str
    VIEW_DELETE_TRIGGER: str
    VIEW_DELETE_FROM: str
    DAY_CREATE: str
    DAY_COLUMN_ID: str
    DAY_COLUMN: str
    DAY_FINISHED_INDEX: str
    DAY_RECLAIMED_INDEX: str
    DAY_MOVE_BACK: str
    DAY_DELETE_ONE: str
    DAY_COUNT: str
    DAY_DROP: str
    DAY_PRUNE: str
    FINISH_INTO: str
    FINISH_STATE: str
    FINISH_ATTEMPT: str
    FINISH_RUN_AT: str
    FINISH_FINISHED_AT: str
    FINISH_NULL: str
    FINISH_RUN_S: str
    FINISH_PARKED: str
    FINISH_ERRORS: str
    FINISH_RESULT: str
    FINISH_PROGRESS: str
    ID_FLOOR_RAISE: str
    PROBE: str
    ID_COUNTER: str
    JOB_GET: str
    JOB_OUTCOME_MANY: str
    JOB_COUNT_BY_STATE: str
    JOB_COUNT_BY_QUEUE: str
    JOB_RETRY: str
    JOB_CANCEL: str
    JOB_LIST: str
    JOB_LIST_OLDEST: str
    JOB_COUNT: str
    JOB_COUNT_STATES: str
    JOB_FIND: str
    JOB_DEAD_GROUPS: str
    JOB_REQUEUE_DEAD: str
    JOB_DISCARD_DEAD: str
    JOB_PRUNE: str
    JOB_PRUNE_PREVIEW: str
    JOB_LOGS_WRITE: str
    JOB_LOGS_READ: str
    JOB_LOGS_PRUNE: str
    NEXT_PAIR: str
    NEXT_KEY_IN_QUEUE: str
    PICK: str
    TURNS_ADVANCE: str
    KEY_TURNS_SLICE_END: str
    JOB_BUSIEST_KEYS: str
    JOB_BLOCKED_KEYS: str
    KEY_TURNS_PRUNE: str
    MIGRATIONS_TABLE: str
    MIGRATION_VERSIONS: str
    MIGRATION_RECORD: str
    MIGRATIONS_TABLE_EXISTS: str
    SCHEMA_VERSION: str
    JOB_STATS_NOW: str
    JOB_STATS_LIVE: str
    JOB_STATS_FINISHED: str
    JOB_STATS_RECLAIMS: str
    JOB_STATS_PERCENTILES: str
    WORKER_BEAT: str
    WORKER_DELETE: str
    WORKER_PRUNE: str
    WORKER_LIST: str
    QUEUE_LIMITED: str
    QUEUE_LOCK: str
    QUEUE_RUNNING: str
    QUEUE_STARTS_SET: str
    QUEUE_SET_PAUSED: str
    QUEUE_SET_LIMITS: str
    QUEUE_KNOWN: str
    QUEUE_LIST: str
    QUEUE_INFO: str
    TASK_PAUSE: str
    TASK_RESUME: str
    TASK_PAUSES: str
    DATA_VERSION: str
    SCHEMA_PEEK: str
    JOB_LIVE_BY_UNIQUE_KEY: str
    JOB_HOLDER_OF: str
    JOB_REPLACE_PENDING: str
    JOB_RELEASE_RUNNING_KEY: str
    JOB_KEY_PASSED: str
    JOB_KEYS_PASSED: str
    JOB_GET_AVAILABLE_IN_QUEUES_BRANCH: str
    JOB_GET_NOTHING: str
    JOBS_PRESENT: str
    ANCESTORS_MEET: str
    JOBS_TO_WAITING: str
    WAIT_INSERT: str
    WAITS_ADD: str
    DEP_INSERT: str
    PARENTS_STATE: str
    EDGES_RESOLVE: str
    RESULT_KEEP: str
    WAITS_DECREMENT: str
    WAITS_READY: str
    WAITS_DELETE: str
    CHILDREN_READY: str
    CHILDREN_READY_PREVIOUS: str
    CHILD_CANCEL: str
    WAIT_DELETE: str
    CHILD_RESULTS: str
    CHILD_RESULTS_SIZE: str
    CHILD_BURY: str
    UNRELEASED_KEEP: str
    UNRELEASED_KEEP_WAITING: str
    CHILD_READY: str
    UNRELEASED_GET: str
    UNRELEASED_DELETE: str
    CHILD_EDGES: str
    EDGES_REOPEN: str
    WAIT_REWRITE: str
    JOB_REWAIT: str
    JOB_STATE_ERROR: str
    OPEN_PARENTS: str
    STRANDED_WAITS: str
    WAITS_EXPIRED: str
    TIMEOUT_MARK: str
    WAIT_NEXT_TIMEOUT: str
    JOB_RESUME: str
    WAIT_PREPARE: str
    PARKED_SIGNALLED: str
    PARKED_SIGNALLED_ANY: str
    JOB_STATE: str
    SIGNAL_APPEND: str
    WAIT_OF: str
    JOB_AUDIT_ADD: str
    SIGNAL_GET: str
    SIGNAL_TAKEN: str
    STEP_GET: str
    STEP_PUT: str
    PARENT_RESULTS: str
    JOB_PARENTS: str
    JOB_PARENT_COUNTS: str
    JOB_PARENTS_AFTER: str
    JOB_CHILDREN: str
    JOB_WAIT: str
    JOB_BATCH: str
    BATCH_INSERT: str
    BATCH_SET_CALLBACKS: str
    BATCH_GET: str
    BATCH_CLOSE: str
    BATCH_ABORT: str
    MEMBERS_CANCEL: str
    BATCH_MEMBER_INSERT: str
    BATCH_INFO: str
    WAITING_LIST: str
    GRAPH_EDGES: str
    GRAPH_NODES: str
    ANY_OPEN_EDGE: str
    BATCH_MEMBERS_PRUNED: str
    WORKFLOW_PRUNE_STEPS: str
    WORKFLOW_PRUNE_SIGNALS: str
    WORKFLOW_PRUNE_DEPS: str
    WORKFLOW_PRUNE_WAITS: str
    WORKFLOW_PRUNE_BATCH_JOBS: str
    WORKFLOW_PRUNE_BATCHES: str
    WORKFLOW_PRUNE_PARENT_RESULTS: str
    WORKFLOW_PRUNE_UNRELEASED: str
    JOB_ARGS: str


STATEMENTS = Statements(**load_statements(__package__ or "skiplock._backends.sqlite"))


@functools.lru_cache(maxsize=16)
def job_get_available_in_queues(count: int) -> str:
    """JOB_GET_AVAILABLE for ``count`` named queues (:q0, :q1, ...): each queue's first :limit
    ready jobs (an ordered walk of the per-queue pending index that stops at :limit, so a
    flood in another queue costs nothing), merged, first :limit taken. SQLite has no LATERAL,
    hence one branch per queue (JOB_GET_AVAILABLE_IN_QUEUES_BRANCH, repeated)."""
    branches = repeat(STATEMENTS.JOB_GET_AVAILABLE_IN_QUEUES_BRANCH, count, "\n    UNION ALL\n    ")
    return fill(STATEMENTS.JOB_GET_AVAILABLE_IN_QUEUES, branches=branches)
