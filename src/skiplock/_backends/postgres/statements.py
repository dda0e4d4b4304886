"""PostgreSQL's typed statement registry: every statement is whole text in ``queries/*.sql``
(one file per concern, ``-- name: NAME`` before each), read once here into ``QUERIES`` and
served per schema as the fields of ``Statements`` (SQLite's twin names them alike) and
``WorkflowStatements``; every migration is a file of ``migrations/`` (``MIGRATIONS``).

``{s}`` is the quoted schema, filled in once per schema (``sql_files.with_schema``). Each
statement opens with its contract. ``$now`` parameters are NULL in production, so the database
clock decides; tests pass a pinned time.

Lock order: a statement that may wait on several job rows locks them in ascending id before
it writes any (the ``picked`` and ``locked`` steps of JOB_REQUEUE_DEAD, JOB_DISCARD_DEAD,
JOB_RECLAIM_WORKER and the completions), so two of them on the same rows queue behind each
other instead of deadlocking. Claims, the heartbeat, JOB_RECLAIM_EXPIRED and JOB_PRUNE lock
with SKIP LOCKED, which never waits, so they cannot close a cycle; the rest write one row.
tests/backends/test_lock_order.py holds the completion batch, the supervisor's release and the
heartbeat to it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields

from ..sql_files import Migration, fill, listing, load_migrations, load_statements, with_schema

_PACKAGE = "skiplock._backends.postgres"

MIGRATIONS: list[Migration] = load_migrations(_PACKAGE)
"""Every released migration, in order: ``migrations/NNNN.sql``, never edited once
released (tests/backends/test_sql_files.py holds each file's checksum)."""

QUERIES: dict[str, str] = load_statements(_PACKAGE)
"""Every named statement of ``queries/*.sql``, ``{s}`` still in it."""


_LIVE = "('pending', 'running')"
"""The live states (JobState.live()), as every statement after the migrations spells them (a
migration's text is history and keeps its own)."""
_FINAL = "('succeeded', 'cancelled', 'dead')"
"""The final states (JobState.final())."""

COPY_COLUMNS = (
    "id task queue args kwargs priority max_attempts run_at timeout correlation_id lease_s"
    " trace_context payload_version segment lane"
)
"""The columns a bulk enqueue's COPY writes, in its records' order (the rest take defaults).
``segment`` is the live generation read once before the COPY (``JOB_COPY_PREPARE``): a
statement keeps the partitions it first routed to for its whole run, so the column's
default, read anew each row, would name a generation attached after a long COPY began."""

RELEASE_CHUNK = 1000
"""Open edges one release statement resolves at most: a fan-out's children become pending a
thousand at a time, each chunk committed (and claimable) while the next is written."""


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement of ``queries/*.sql`` but the workflows' for one schema, read as
    attributes (a misspelt name is a mypy error, where a string key was a KeyError at run
    time); tests check none is left out and each is used."""

    SESSION_CHECK: str
    SORT_OFF_IN_TRANSACTION: str
    SEQSCAN_OFF_IN_TRANSACTION: str
    MIGRATIONS_TABLE: str
    SCHEMA_CREATE: str
    MIGRATIONS_LOCK: str
    MIGRATION_VERSIONS: str
    MIGRATION_RECORD: str
    MIGRATIONS_TABLE_EXISTS: str
    SCHEMA_VERSION: str
    DATABASE_NUMBER: str
    DATABASE_NUMBER_TABLE: str
    DATABASE_NUMBER_READ: str
    JOB_INSERT_MANY: str
    JOB_COPY_PREPARE: str
    JOB_LIVE_BY_UNIQUE_KEY: str
    JOB_HOLDER_OF: str
    JOB_REPLACE_PENDING: str
    JOB_RELEASE_RUNNING_KEY: str
    JOB_GET_AVAILABLE: str
    JOB_GET_AVAILABLE_IN_QUEUES: str
    CLAIM_WITH_POINTER: str
    JOB_GET_AVAILABLE_KEYED: str
    JOB_GET_AVAILABLE_AGED: str
    JOB_READY_EXISTS: str
    JOB_BUSIEST_KEYS: str
    JOB_BLOCKED_KEYS: str
    KEY_TURNS_PRUNE: str
    JOB_NEXT_RUN_AT: str
    JOB_SET_STATE_IF_RUNNING_MANY: str
    JOB_SET_STATE_AND_RELEASE: str
    JOB_GET: str
    JOB_OUTCOME_MANY: str
    JOB_COUNT_BY_STATE: str
    JOB_COUNT_BY_QUEUE: str
    JOB_RETRY: str
    JOB_RECLAIM_EXPIRED: str
    JOB_RECLAIM_WORKER: str
    JOB_HEARTBEAT_MANY: str
    CRON_SLOT_INSERT: str
    CRON_SLOT_INSERT_AT: str
    CRON_PREVIOUS_RUN_LIVE: str
    CRON_SLOT_SET_OUTCOME: str
    CRON_LAST_SLOTS: str
    CRON_LAST_RUNS: str
    CRON_SLOTS_PRUNE: str
    JOB_IMPORT_OUTCOME: str
    JOB_CANCEL: str
    JOB_CANCEL_REQUESTED: str
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
    QUEUE_LIMITED: str
    QUEUE_LOCK: str
    QUEUE_RUNNING: str
    QUEUE_STARTS_SET: str
    QUEUE_SET_PAUSED: str
    QUEUE_SET_LIMITS: str
    QUEUE_LIST: str
    QUEUE_KNOWN: str
    QUEUE_INFO: str
    TASK_PAUSE: str
    TASK_RESUME: str
    TASK_PAUSES: str
    AUDIT_RECORD: str
    AUDIT_LIST: str
    AUDIT_PRUNE: str
    AUDIT_PRUNE_PREVIEW: str
    JOB_STATS_NOW: str
    JOB_STATS_LIVE: str
    JOB_STATS_WAITING: str
    JOB_STATS_FINISHED: str
    JOB_STATS_RECLAIMS: str
    JOB_STATS_RECLAIMS_REST: str
    JOB_STATS_PERCENTILES: str
    JOB_STATS_PERCENTILES_REST: str
    WORKER_BEAT: str
    WORKER_DELETE: str
    WORKER_PRUNE: str
    WORKER_LIST: str

    @classmethod
    def for_schema(cls, schema: str) -> Statements:
        """The statements of one schema, made once per process (a backend is made per sync
        enqueue on a caller's connection; rewriting ~75 statements each time cost ~0.25 ms)."""
        return _for_schema(schema)


@functools.lru_cache(maxsize=64)
def _for_schema(schema: str) -> Statements:
    return Statements(**{f.name: _default(f.name, schema) for f in fields(Statements)})


_EVERY_LIVE_SEGMENT = "segment <> 4"
"""The ordinary claims' segments part as the statements hold it: every live segment but the
keyed one (a limited queue's claim, the tests, and any claim not named by a worker)."""

NAMED_CLAIMS = ("JOB_GET_AVAILABLE", "JOB_GET_AVAILABLE_IN_QUEUES")
"""The claims whose text can name the live segments they read (``named_claim``)."""


def _default(name: str, schema: str) -> str:
    text = with_schema(QUERIES[name], schema)
    return fill(text, segments=_EVERY_LIVE_SEGMENT) if name in NAMED_CLAIMS else text


@functools.lru_cache(maxsize=256)
def named_claim(schema: str, name: str, segments: tuple[int, ...]) -> str:
    """Claim ``name`` (one of ``NAMED_CLAIMS``) of ``schema`` reading only ``segments`` (as
    constants: PostgreSQL leaves every other live table out of the plan as it makes it), in
    ``CLAIM_WITH_POINTER``: its rows, then the pointer (storage/sight.py says why)."""
    if name not in NAMED_CLAIMS or not segments:
        raise ValueError(f"{name} cannot name the segments {segments}")
    claim = fill(
        with_schema(QUERIES[name], schema),
        segments=f"segment IN ({listing(str(int(n)) for n in segments)})",
    )
    return fill(with_schema(QUERIES["CLAIM_WITH_POINTER"], schema), claim=claim)


@dataclass(frozen=True, slots=True)
class WorkflowStatements:
    """The workflows' statements (``queries/workflow.sql``) for one schema."""

    JOBS_MISSING: str
    ANCESTORS_MEET: str
    JOBS_TO_WAITING: str
    WAITS_INSERT: str
    WAITS_ADD: str
    DEPS_INSERT: str
    DEPS_RESOLVE: str
    WAITS_DECREMENT: str
    CHILDREN_CANCEL: str
    RELEASE_SUCCEEDED: str
    CHILDREN_READY: str
    OPEN_PARENTS: str
    STRANDED_WAITS: str
    WAITS_EXPIRED: str
    WAIT_PREPARE: str
    PARKED_RESUME: str
    PARKED_SIGNALLED: str
    JOB_LOCK_STATE: str
    SIGNAL_APPEND: str
    WAIT_OF: str
    SIGNAL_WAKE: str
    SIGNAL_TAKE: str
    JOB_AUDIT_ADD: str
    STEP_GET: str
    STEP_PUT: str
    PARENT_RESULTS: str
    JOB_PARENTS: str
    JOB_CHILDREN: str
    JOB_PARENT_COUNTS: str
    JOB_PARENTS_AFTER: str
    JOB_WAIT: str
    JOB_BATCH: str
    BATCH_INSERT: str
    BATCH_SET_CALLBACKS: str
    BATCH_GET_LOCKED: str
    BATCH_CLOSE: str
    BATCH_ABORT: str
    MEMBERS_CANCEL: str
    WAITS_DROP: str
    BATCH_MEMBERS_INSERT: str
    BATCH_INFO: str
    WAIT_NEXT_TIMEOUT: str
    WAITING_LIST: str
    GRAPH_EDGES: str
    GRAPH_NODES: str
    WORKFLOW_PRUNE: str
    UNRELEASED_TAKE: str
    CHILD_EDGES: str
    EDGES_REOPEN: str
    JOB_REWAIT: str
    JOB_STATE_ERROR: str

    @classmethod
    def for_schema(cls, schema: str) -> WorkflowStatements:
        return cls(**{f.name: with_schema(QUERIES[f.name], schema) for f in fields(cls)})
