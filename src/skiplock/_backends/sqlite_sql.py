"""SQLite's statements, under the same names as PostgreSQL's.

Times are REAL Unix seconds. SQLite runs inside this process, so "the database clock" is this
machine's clock: the backend reads it once per transaction and binds it as ``:now``. Every
write runs inside ``BEGIN IMMEDIATE``, which takes the file's write lock up front, so claims in
several processes serialise instead of double-claiming.

From migration 11 the statements write ``skiplock_jobs_live`` (pending, running and dead jobs,
and finished ones not moved yet) and read it wherever only live or dead jobs can match; a read
of any job reads the view ``skiplock_jobs`` (the live table and the day tables of finished
jobs, sqlite_history.py), whose branches SQLite searches each by its own primary key or index.
"""

from . import sqlite_aging_sql as _aging
from . import sqlite_ids as _ids
from . import sqlite_keys as _keys
from . import sqlite_observe_sql as _observe
from . import sqlite_unique as _unique
from .job_audit_sql import sqlite_action
from .sql_files import load_migrations

MIGRATIONS: list[tuple[int, str, str]] = [
    (m.version, m.name, m.body) for m in load_migrations("skiplock._backends", "sqlite/migrations")
]
"""Every released migration (version, recorded name, body), from ``sqlite/migrations/NNNN.sql``:
migrate runs a body statement by statement (``sqlite._statements``); migration 16 also
widens the live table's state CHECK (sqlite.py: widen_state_check)."""

_LIVE = "('pending', 'running')"
"""The live states (JobState.live()), for every statement that names them after the
migrations (a migration's text is history and keeps its own)."""
_FINAL = "('succeeded', 'cancelled', 'dead')"
"""The final states (JobState.final())."""

MIGRATIONS_TABLE = """
-- Record of applied migrations; created before anything else.
CREATE TABLE IF NOT EXISTS skiplock_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at REAL NOT NULL
)
"""

MIGRATION_VERSIONS = "SELECT version FROM skiplock_migrations ORDER BY version"

MIGRATION_RECORD = (
    "INSERT INTO skiplock_migrations (version, name, applied_at) VALUES (:version, :name, :now)"
)

MIGRATIONS_TABLE_EXISTS = """
-- Whether skiplock was ever migrated here (SQLite cannot name a missing table in a CASE).
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'skiplock_migrations'
"""

SCHEMA_VERSION = "SELECT coalesce(max(version), 0) FROM skiplock_migrations"

JOB_INSERT = """
-- Insert one job of a batch (the batch shares one transaction): a job with a unique key.
INSERT INTO skiplock_jobs_live
    (task, queue, args, kwargs, priority, max_attempts, run_at, timeout, correlation_id,
     created_at, lease_s, unique_key, unique_succeeded, trace_context, payload_version,
     concurrency_key, key_limit, key_order, unique_until, key_weight, unique_scope)
VALUES (:task, :queue, :args, :kwargs, :priority, :max_attempts, :run_at, :timeout,
        :correlation_id, :now, :lease_s, :unique_key, :unique_succeeded, :trace_context,
        :payload_version, :concurrency_key, :key_limit, :key_order, :unique_until,
        :key_weight, :unique_scope)
"""

JOB_INSERT_ROWS = """
-- Insert {n} jobs of a batch in one statement: AUTOINCREMENT writes its counter once per
-- statement, so one statement per row costs 2.5 times as much (10,000 jobs: 111 ms vs 45 ms).
INSERT INTO skiplock_jobs_live
    (task, queue, args, kwargs, priority, max_attempts, run_at, timeout, correlation_id,
     created_at, lease_s, unique_key, unique_succeeded, trace_context, payload_version,
     concurrency_key, key_limit, key_order, key_weight)
VALUES {rows}
"""

_QUEUE_DEPTH = """((SELECT count(*) FROM skiplock_jobs_live j
      WHERE j.queue = q.name AND j.state = 'pending')
     + (SELECT count(*) FROM skiplock_jobs_live j
        WHERE j.queue = q.name AND j.state = 'running'))"""
"""A bounded queue ``q``'s live depth (its pending and running jobs), as QUEUE_DEPTH_LIMIT
reads it and JOB_INSERT_ONE checks it."""

JOB_INSERT_ONE = (
    """
-- One job without a unique key (the one-by-one enqueue) in one statement: its bounded queue's
-- check and the insert. A statement is atomic, and alone (autocommit) it is its own write
-- transaction, taking the write lock at its start as BEGIN IMMEDIATE does: so no BEGIN, no
-- separate depth read, no COMMIT (four statements were one job's). No row inserted: the
-- queue is at its max_depth (QUEUE_DEPTH_LIMIT's rule for one job). Its 20th parameter is
-- the queue again (qmark style: Python 3.12 deprecates ?NNN given a sequence). Its id is
-- above the counter and the id ledger's mark, read under the lock the insert takes
-- (sqlite_ids.py: an id handed out in a transaction that rolled back is not handed out again).
INSERT INTO skiplock_jobs_live
    (id, task, queue, args, kwargs, priority, max_attempts, run_at, timeout, correlation_id,
     created_at, lease_s, unique_key, unique_succeeded, trace_context, payload_version,
     concurrency_key, key_limit, key_order, key_weight)
SELECT """
    + _ids.NEXT_JOB_ID
    + """, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
WHERE NOT EXISTS (
    SELECT 1 FROM skiplock_queues q
    WHERE q.name = ? AND q.max_depth IS NOT NULL AND """
    + _QUEUE_DEPTH
    + """ >= q.max_depth
)
"""
)

JOB_INSERT_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
"""One row of JOB_INSERT_ROWS."""

JOB_INSERT_ROWS_MAX = 999 // 19
"""Rows a statement: 19 values each, within the 999 parameters older SQLite builds allow."""


JOB_INSERT_UNIQUE = (
    JOB_INSERT.rstrip()
    + """
ON CONFLICT (unique_key, unique_scope) WHERE unique_key IS NOT NULL
    AND """
    + _unique.holds()
    + """
DO NOTHING
RETURNING id
"""
)

JOB_LIVE_BY_UNIQUE_KEY = _unique.JOB_HOLDER_OF
"""The job holding a unique key: the batch's lookup, the same read as a replace's."""

JOB_HOLDER_OF = _unique.JOB_HOLDER_OF
JOB_REPLACE_PENDING = _unique.JOB_REPLACE_PENDING
JOB_RELEASE_RUNNING_KEY = _unique.JOB_RELEASE_RUNNING_KEY
JOB_KEY_PASSED = _unique.JOB_KEY_PASSED
JOB_KEYS_PASSED = _unique.JOB_KEYS_PASSED

QUEUE_DEPTH_LIMIT = (
    """
-- A bounded queue's limit and its live depth (no row: the queue is unbounded).
SELECT q.max_depth, """
    + _QUEUE_DEPTH
    + """
FROM skiplock_queues q WHERE q.name = :queue AND q.max_depth IS NOT NULL
"""
)

LAST_INSERT_ID = "SELECT last_insert_rowid()"

_CLAIM_SET = """UPDATE skiplock_jobs_live
SET state = 'running', attempt = attempt + 1, attempted_at = :now, started_at = NULL,
    ready_at = max(run_at, created_at),
    locked_by = :worker, lease_token = :token,
    lease_expires_at = :now + coalesce(lease_s, coalesce(timeout, :default_lease) + :margin)
"""
_CLAIM_RETURNING = """
RETURNING id, task, queue, args, kwargs, priority, attempt, max_attempts, timeout,
          lease_token, created_at, lease_expires_at,
          coalesce(lease_s, coalesce(timeout, :default_lease) + :margin) AS lease_s,
          correlation_id, trace_context, coalesce(payload_version, 1) AS payload_version,
          NULL AS segment, run_at
"""
"""Both claims' update of the rows they picked: running, attempt + 1, leased to :worker under
:token for the job's lease, or its timeout (else :default_lease) + :margin."""

_READY = """state = 'pending' AND (concurrency_key IS NOT NULL) = 0 AND run_at <= :now
      -- paused queues never; limited and aging queues only through their own claim (:limited)
      AND queue NOT IN (SELECT name FROM skiplock_queues
                        WHERE paused OR (NOT :limited AND (max_running IS NOT NULL
                                                          OR rate_per_s IS NOT NULL
                                                          OR aging_s IS NOT NULL)))
      AND task NOT IN (SELECT task FROM skiplock_task_pauses
                       WHERE until IS NULL OR until > :now)"""
"""What makes a live row one the ordinary claim takes: pending, unkeyed (keyed jobs have their
own claim, sqlite_keys.py; the pending index leads with this term), due, of no paused queue
or task, and of no limited or aging queue unless :limited."""

_READY_ANY_AGING = _READY.replace(
    "\n                                                          OR aging_s IS NOT NULL", ""
)
"""_READY with aging queues' jobs in: their claim is their own, but a ready one is ready."""

JOB_GET_AVAILABLE = (
    """
-- Claim up to :limit ready jobs of any queue: running, attempt + 1, leased to :worker under
-- :token.
"""
    + _CLAIM_SET
    + """WHERE id IN (
    SELECT id FROM skiplock_jobs_live
    WHERE """
    + _READY
    + """
    ORDER BY priority DESC, run_at, id
    LIMIT :limit
)
"""
    + _CLAIM_RETURNING
)

JOB_BUSIEST_KEYS = """
-- The :limit keys with the most running jobs, then the most ready (at :now), of queue :queue
-- and task :task (NULL: any): each key's live jobs counted (the keyed indexes' rows alone).
SELECT concurrency_key AS key,
       sum(state = 'running') AS running,
       sum(state = 'pending' AND run_at <= :now) AS ready,
       sum(state = 'pending') AS pending,
       max(key_limit) AS key_limit
FROM skiplock_jobs_live
WHERE state IN ('pending', 'running') AND concurrency_key IS NOT NULL
  AND (:queue IS NULL OR queue = :queue) AND (:task IS NULL OR task = :task)
GROUP BY concurrency_key
ORDER BY running DESC, ready DESC, pending DESC, concurrency_key
LIMIT :limit
"""

JOB_BLOCKED_KEYS = """
-- The :limit ordered keys a dead job holds (ordering_on_dead 'block'), oldest first: the dead
-- job and how many live jobs wait behind it.
SELECT d.concurrency_key AS key, min(d.id) AS dead_job_id,
       (SELECT count(*) FROM skiplock_jobs_live l
        WHERE l.state IN ('pending', 'running') AND l.concurrency_key IS NOT NULL
          AND l.concurrency_key = d.concurrency_key) AS waiting
FROM skiplock_jobs_live d
WHERE d.state = 'dead' AND d.key_order = 'block'
GROUP BY d.concurrency_key
ORDER BY min(d.id)
LIMIT :limit
"""

JOB_CLAIM_IDS = (
    """
-- Claim the pending jobs of ids :ids (a JSON array; the keyed claim's pick, sqlite_keys.py,
-- in the same write transaction).
"""
    + _CLAIM_SET
    + """WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'pending'
"""
    + _CLAIM_RETURNING
)

KEY_TURNS_PRUNE = _keys.KEY_TURNS_PRUNE
"""The upkeep's removal of the turn rows of keys with no live job (sqlite_keys.prune_turns)."""

JOB_READY_EXISTS = (
    """
-- Whether the ordinary claim has a ready job to take at :now in the queues of the JSON
-- array :queues (NULL: any; :limited is false). SQLite's claim never passes one over (it
-- holds the file's write lock: no row is held from it); a burst worker asks this before it
-- ends, as on PostgreSQL, where a claim skips rows another session holds.
SELECT EXISTS (
    SELECT 1 FROM skiplock_jobs_live
    WHERE """
    + _READY_ANY_AGING
    + """
      AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
) OR EXISTS (
    -- or a ready keyed job whose key has room (the keyed claim's rule)
    SELECT 1 FROM skiplock_jobs_live j
    WHERE j.state = 'pending' AND j.concurrency_key IS NOT NULL AND j.run_at <= :now
      AND (:queues IS NULL OR j.queue IN (SELECT value FROM json_each(:queues)))
      AND j.queue NOT IN (SELECT name FROM skiplock_queues
                          WHERE paused OR max_running IS NOT NULL OR rate_per_s IS NOT NULL)
      AND j.task NOT IN (SELECT task FROM skiplock_task_pauses
                         WHERE until IS NULL OR until > :now)
      AND (j.key_limit IS NULL
           OR (SELECT count(*) FROM skiplock_jobs_live r
               WHERE r.state = 'running' AND r.concurrency_key = j.concurrency_key)
              < j.key_limit)
      -- an ordered key's head alone, and not while a dead job blocks it or an earlier
      -- one is parked on a signal
      AND (j.key_order IS NULL
           OR NOT EXISTS (SELECT 1 FROM skiplock_jobs_live e
                          WHERE e.state IN ('pending', 'running')
                            AND e.concurrency_key IS NOT NULL
                            AND e.concurrency_key = j.concurrency_key AND e.id < j.id)
              AND NOT EXISTS (SELECT 1 FROM skiplock_jobs_live d
                              WHERE d.state = 'dead' AND d.key_order = 'block'
                                AND d.concurrency_key = j.concurrency_key AND d.id < j.id)
              AND NOT EXISTS ("""
    + _keys.PARKED_AHEAD.format(key="j.concurrency_key", head="j.id")
    + """))
)
"""
)


JOB_NEXT_RUN_AT = """
-- Seconds from :now until the earliest pending job due after :since (the start of the claim
-- that came up short), NULL if none: an idle worker sleeps until then rather than a whole
-- poll interval, and a job that came due between that claim and this read answers <= 0
-- (claim again at once) instead of being missed. The pending index leads with priority, so a
-- min over run_at would read every pending row: walk its distinct priorities instead (a loose
-- index scan, at most :most of them) and probe each one's first run_at after the claim.
-- The index leads with whether a job is keyed: the walk is made for each of the two.
WITH RECURSIVE p(keyed, priority, n) AS (
    SELECT f.keyed, (SELECT max(priority) FROM skiplock_jobs_live
                     WHERE state = 'pending' AND (concurrency_key IS NOT NULL) = f.keyed), 1
    FROM (SELECT 0 AS keyed UNION ALL SELECT 1) f
    UNION ALL
    SELECT p.keyed, (SELECT max(j.priority) FROM skiplock_jobs_live j
                     WHERE j.state = 'pending' AND (j.concurrency_key IS NOT NULL) = p.keyed
                       AND j.priority < p.priority), p.n + 1
    FROM p WHERE p.priority IS NOT NULL AND p.n < :most
)
SELECT min((
    SELECT j.run_at FROM skiplock_jobs_live j
    WHERE j.state = 'pending' AND (j.concurrency_key IS NOT NULL) = p.keyed
      AND j.priority = p.priority AND j.run_at > :since
    ORDER BY j.run_at LIMIT 1)) - :now
FROM p WHERE p.priority IS NOT NULL
"""


JOB_GET_AVAILABLE_AGED = _aging.aged_claim(_CLAIM_SET, _CLAIM_RETURNING)


def job_get_available_in_queues(count: int) -> str:
    """JOB_GET_AVAILABLE for ``count`` named queues (:q0, :q1, ...): each queue's first :limit
    ready jobs (an ordered walk of the per-queue pending index that stops at :limit, so a
    flood in another queue costs nothing), merged, first :limit taken. SQLite has no LATERAL,
    hence one branch per queue."""
    branch = """SELECT * FROM (
        SELECT id, priority, run_at FROM skiplock_jobs_live
        WHERE queue = :q{i} AND state = 'pending' AND (concurrency_key IS NOT NULL) = 0
          AND run_at <= :now
          AND :q{i} NOT IN (SELECT name FROM skiplock_queues
                            WHERE paused OR (NOT :limited AND (max_running IS NOT NULL
                                                              OR rate_per_s IS NOT NULL
                                                              OR aging_s IS NOT NULL)))
          AND task NOT IN (SELECT task FROM skiplock_task_pauses
                           WHERE until IS NULL OR until > :now)
        ORDER BY priority DESC, run_at, id
        LIMIT :limit)"""
    branches = "\n    UNION ALL\n    ".join(branch.format(i=i) for i in range(count))
    return (
        """
-- Claim up to :limit ready jobs of the named queues (see job_get_available_in_queues).
"""
        + _CLAIM_SET
        + f"""WHERE id IN (
    SELECT id FROM (
    {branches}
    )
    ORDER BY priority DESC, run_at, id
    LIMIT :limit
)
"""
        + _CLAIM_RETURNING
    )


_OUTCOME = {
    "state": ":state",
    "attempt": "attempt + :attempt_delta",
    "run_at": "coalesce(:run_at, run_at)",
    "finished_at": ":finished_at",
    "lease_token": "NULL",
    "lease_expires_at": "NULL",
    "run_s": ":run_s",
    # parked on a signal: the unique index counts it as its key's holder (sqlite_unique.py)
    "parked": "CASE WHEN :state = 'waiting' THEN 1 END",
    "errors": """CASE WHEN :error IS NULL THEN errors
                  WHEN json_array_length(errors) >= :max_errors
                  THEN json_insert(json_remove(errors, '$[0]'), '$[#]', json(:error))
                  ELSE json_insert(errors, '$[#]', json(:error)) END""",
}
"""One outcome's columns (decided in Python: _transitions.py): errors are appended, keeping the
last :max_errors. Both the update in place and the move to a day table write these."""

_KEEPING = {"result": ":result", "progress": "coalesce(:progress, progress)"}
"""An outcome's result (:result) and a progress record left since the last heartbeat
(:progress, NULL: none)."""

_UNDER_LEASE = "id = :id AND lease_token = :token AND state = 'running'"
"""An outcome is written only while its row still runs under its lease token (fencing)."""


def _set_state(columns: dict[str, str]) -> str:
    sets = ",\n    ".join(f"{name} = {value}" for name, value in columns.items())
    return f"""
-- Write one outcome of a batch in place, only while the row is still running under its
-- lease token.
UPDATE skiplock_jobs_live
SET {sets}
WHERE {_UNDER_LEASE}
"""


JOB_SET_STATE_IF_RUNNING_MANY = _set_state(_OUTCOME)
"""An outcome with no result and no progress to store: a running row holds no result (only a
success writes one, and a person's requeue clears it), so these columns are left alone. Two
columns fewer per row was 0.4-0.9 us of the ~11 us a row costs (measured)."""

JOB_SET_STATE_KEEPING_RESULT = _set_state({**_OUTCOME, **_KEEPING})
"""The same with the job's result and progress."""


def job_finish_into(table: str, columns: tuple[str, ...], keeping: bool) -> str:
    """One succeeded or cancelled outcome written straight into day table ``table`` (the live
    table's ``columns``, in order): the row as the update in place would leave it, copied
    while it still runs under its lease token; the caller deletes the live rows it copied.
    Not a succeeded job that keeps its unique key (the live table's unique index holds it):
    that outcome is written in place."""
    outcome = {**_OUTCOME, **_KEEPING} if keeping else _OUTCOME
    values = ", ".join(outcome.get(name, name) for name in columns)
    return f"""
INSERT INTO {table} ({", ".join(columns)})
SELECT {values} FROM skiplock_jobs_live
WHERE {_UNDER_LEASE}
  AND NOT (:state = 'succeeded' AND unique_succeeded AND unique_key IS NOT NULL)
"""


JOB_DELETE_MOVED = """
-- The live rows a completion batch copied into a day table (:ids, a JSON array).
DELETE FROM skiplock_jobs_live WHERE id IN (SELECT value FROM json_each(:ids))
"""

_RECORD = """id, task, queue, state, args, kwargs, priority, attempt, max_attempts, run_at,
       created_at, attempted_at, finished_at, locked_by, lease_expires_at, errors,
       correlation_id, audit, started_at, result, progress, payload_version, unique_key,
       unique_until, concurrency_key, key_limit, key_order, key_weight"""
"""An inspection read's columns (common.RECORD_COLUMNS), one list for every such read."""

JOB_GET = (
    """
-- One job row, for inspection.
SELECT """
    + _RECORD
    + """
FROM skiplock_jobs WHERE id = :id
"""
)

JOB_OUTCOME_MANY = """
-- Where the waited-for jobs (:ids, a JSON array) stand: state, the result of a succeeded one,
-- the last error of a finished one. One primary-key probe per id.
SELECT id, state, CASE WHEN state = 'succeeded' THEN result END AS result,
       CASE WHEN state IN ('cancelled', 'dead') THEN json_extract(errors, '$[#-1]') END
           AS last_error
FROM skiplock_jobs WHERE id IN (SELECT value FROM json_each(:ids))
"""

JOB_COUNT_BY_STATE = """
-- Jobs per state, optionally for one queue; running jobs not yet started count as claimed.
SELECT CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END,
       count(*)
FROM skiplock_jobs WHERE :queue IS NULL OR queue = :queue GROUP BY 1
"""

JOB_COUNT_BY_QUEUE = """
-- Jobs per queue and state (running jobs not yet started count as claimed): the Overview's.
SELECT queue,
       CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END,
       count(*)
FROM skiplock_jobs GROUP BY 1, 2
"""

JOB_RETRY = (
    """
-- A person requeues a finished job: pending now, attempts reset, its result and progress gone
-- (so a row that is not succeeded never holds a result: completions may leave it alone).
UPDATE skiplock_jobs_live
SET state = 'pending', attempt = 0, run_at = :now, finished_at = NULL, result = NULL,
    progress = NULL,
    lease_token = NULL, lease_expires_at = NULL, cancel_requested = 0,
    -- a key of a row from before migration 18 is its task's own
    unique_scope = CASE WHEN unique_key IS NOT NULL THEN coalesce(unique_scope, task) END,
    audit = """
    + sqlite_action(":now", ":who", "'retry'")
    + """
WHERE id = :id AND state IN """
    + _FINAL
    + """
  -- one that ended waiting for its parents waits for them again instead
  -- (workflow_flows.retry_unreleased): never pending without their results
  AND NOT EXISTS (SELECT 1 FROM skiplock_unreleased u WHERE u.job_id = :id)
"""
)

_RECLAIM_SET = """UPDATE skiplock_jobs_live
SET state = CASE WHEN cancel_requested THEN 'cancelled'
                 WHEN attempt >= max_attempts THEN 'dead' ELSE 'pending' END,
    finished_at = CASE WHEN cancel_requested OR attempt >= max_attempts THEN :now END,
    -- run_at kept: a reclaimed job keeps its place among the ready (its priority, its age)
    lease_token = NULL, lease_expires_at = NULL,
    reclaims = reclaims + 1, reclaimed_at = :now, run_s = NULL,
    errors = json_insert(
        CASE WHEN json_array_length(errors) >= :max_errors THEN json_remove(errors, '$[0]')
             ELSE errors END,
        '$[#]',
        json_object('attempt', attempt, 'at', :now,
                    'message', {why},
                    'traceback', NULL))
"""
"""What both reclaims do with the rows they pick (see PostgreSQL's _RECLAIM_UPDATE)."""

_RECLAIM_RETURNING = """
RETURNING id, task, queue, state, attempt, max_attempts, correlation_id, locked_by
"""

JOB_RECLAIM_EXPIRED = (
    """
-- Return rows whose lease expired to pending (or dead when attempts are spent; cancelled when a
-- person asked to cancel them, whose worker is gone), noting why.
"""
    + _RECLAIM_SET.replace(
        "{why}",
        "'lease expired (worker ' || coalesce(locked_by, '?') || ' stopped heartbeating)'",
    )
    + """WHERE id IN (SELECT id FROM skiplock_jobs_live
             WHERE state = 'running' AND lease_expires_at < :now LIMIT 1000)
"""
    + _RECLAIM_RETURNING
)

JOB_RECLAIM_WORKER = (
    """
-- JOB_RECLAIM_EXPIRED for every lease of worker :worker (its token prefix: tokens are
-- '<worker id>:<claim>'), expired or not: its supervisor saw it exit, or another worker saw
-- it is gone, so nothing renews them; the error reads 'worker <locked_by> ' || :why.
-- A row a live worker holds has another token and is never touched (fencing unchanged).
"""
    + _RECLAIM_SET.replace("{why}", "'worker ' || coalesce(locked_by, '?') || ' ' || :why")
    + """WHERE id IN (SELECT id FROM skiplock_jobs_live
             WHERE state = 'running' AND lease_expires_at IS NOT NULL
               AND substr(lease_token, 1, length(:worker) + 1) = :worker || ':')
"""
    + _RECLAIM_RETURNING
)

JOB_HEARTBEAT_MANY = """
-- Extend one lease of a batch if the row is still running under its token; mark it started
-- if its worker says it is and it was not yet, and store its new progress record (NULL: none).
UPDATE skiplock_jobs_live
SET lease_expires_at = :now + coalesce(lease_s, coalesce(timeout, :default_lease) + :margin),
    started_at = CASE WHEN :started THEN coalesce(started_at, :now) ELSE started_at END,
    progress = coalesce(:progress, progress)
WHERE id = :id AND lease_token = :token AND state = 'running'
"""

CRON_SLOT_INSERT = """
-- Claim one slot of one schedule; no change means another scheduler already has it.
INSERT OR IGNORE INTO skiplock_cron_slots (schedule, slot, created_at)
VALUES (:schedule, :slot, :now)
"""

CRON_SLOT_INSERT_AT = """
-- Claim one slot with the time the claim was made given (Django's PeriodicDefer.created).
INSERT OR IGNORE INTO skiplock_cron_slots (schedule, slot, created_at)
VALUES (:schedule, :slot, coalesce(:created, :now))
"""

CRON_PREVIOUS_RUN_LIVE = (
    """
-- Whether a job this schedule enqueued is still pending or running (for overlap=False).
SELECT EXISTS (
    SELECT 1 FROM skiplock_cron_slots c JOIN skiplock_jobs_live j ON j.id = c.job_id
    WHERE c.schedule = :schedule AND j.state IN """
    + _LIVE
    + """
)
"""
)

CRON_SLOT_SET_OUTCOME = """
-- Record what the claimed slot did: the job it enqueued, or that it was skipped.
UPDATE skiplock_cron_slots SET job_id = :job_id, skipped = :skipped
WHERE schedule = :schedule AND slot = :slot
"""

CRON_LAST_SLOTS = """
-- The most recent slot claimed per schedule.
SELECT schedule, max(slot) FROM skiplock_cron_slots GROUP BY schedule
"""

CRON_LAST_RUNS = """
-- Each schedule's most recent slot and the job it enqueued (SQLite gives the bare job_id
-- column from the row holding the max).
SELECT schedule, max(slot), job_id FROM skiplock_cron_slots GROUP BY schedule
"""

JOB_IMPORT_OUTCOME = """
-- A finished task moved in from another queue's table (Django's import_tasks_db): the row
-- just inserted pending in this transaction takes the outcome it had there.
UPDATE skiplock_jobs_live
SET state = :state, attempt = :attempt, created_at = :created_at, attempted_at = :attempted_at,
    started_at = :attempted_at, finished_at = :finished_at, result = :result, errors = :errors,
    locked_by = :locked_by
WHERE id = :id AND state = 'pending'
"""

CRON_SLOTS_PRUNE = """
-- Forget slots older than the cut-off.
DELETE FROM skiplock_cron_slots WHERE slot < :before
"""

JOB_CANCEL = (
    """
-- A person cancels a job: pending or waiting -> cancelled at once; running -> flagged for its
-- worker (a waiting job's children follow their on_parent_failure at the next release); a
-- running job already flagged is left as it is (postgres_sql.JOB_CANCEL).
UPDATE skiplock_jobs_live
SET state = CASE WHEN state IN ('pending', 'waiting') THEN 'cancelled' ELSE state END,
    finished_at = CASE WHEN state IN ('pending', 'waiting') THEN :now ELSE finished_at END,
    cancel_requested = 1,
    audit = """
    + sqlite_action(":now", ":who", "'cancel'")
    + """
WHERE id = :id AND state IN ('pending', 'running', 'waiting')
  AND NOT (state = 'running' AND cancel_requested)
RETURNING state
"""
)

JOB_CANCEL_REQUESTED = """
-- Which of the jobs a worker holds a person asked to cancel.
SELECT id FROM skiplock_jobs_live
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'running' AND cancel_requested
"""

_LAST_ERROR = (
    "coalesce(CASE WHEN json_valid(errors) THEN json_extract(errors, '$[#-1].message') END, '')"
)
"""A job's last recorded error message, '' if none: a dead-letter group's key (JOB_DEAD_GROUPS)
and the ``last_error`` filter, which matches it exactly (as on PostgreSQL)."""

_FILTER = (
    """
      -- error: a literal substring of a recorded error's decoded message in any case, as on
      -- PostgreSQL (skiplock_lower is Python's str.lower, registered on the connection:
      -- SQLite's own lower() folds ASCII only); a row whose errors are not JSON matches nothing
      AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
      AND (:task IS NULL OR task = :task)
      AND (:queue IS NULL OR queue = :queue)
      AND (:error IS NULL OR CASE WHEN json_valid(errors) THEN EXISTS (
          SELECT 1 FROM json_each(errors) e
          WHERE instr(skiplock_lower(json_extract(CASE WHEN e.type = 'object' THEN e.value END,
                                                  '$.message')),
                      skiplock_lower(:error)) > 0) ELSE 0 END)
      AND (:since IS NULL OR coalesce(finished_at, created_at) >= :since)
      AND (:until IS NULL OR coalesce(finished_at, created_at) < :until)
      AND (:last_error IS NULL OR """
    + _LAST_ERROR
    + """ = :last_error)
"""
)

JOB_LIST = (
    """
-- Jobs matching a filter, newest first; every condition is optional. :before pages by
-- keyset (ids below the previous page's last): a backward walk of the rowid from there,
-- never OFFSET (written as a range on id, not "IS NULL OR", so the planner seeks to it).
SELECT """
    + _RECORD
    + """
FROM skiplock_jobs
WHERE (:state IS NULL OR state = :state)
      AND id < coalesce(:before, 9223372036854775807)"""
    + _FILTER
    + "ORDER BY id DESC LIMIT :limit"
)

JOB_LIST_OLDEST = (
    """
-- Jobs matching a filter, oldest first: the ones a bulk action with the same filter and
-- limit acts on (:before pages forward here: ids above the previous page's last).
SELECT """
    + _RECORD
    + """
FROM skiplock_jobs
WHERE (:state IS NULL OR state = :state)
      AND id > coalesce(:before, 0)"""
    + _FILTER
    + "ORDER BY id LIMIT :limit"
)

JOB_COUNT = (
    """
-- How many jobs match JOB_LIST's filter (a bulk action's preview).
SELECT count(*) FROM skiplock_jobs
WHERE (:state IS NULL OR state = :state)"""
    + _FILTER
)

JOB_COUNT_STATES = (
    """
-- How many jobs match JOB_LIST's filter in each state (:state NULL: every state), in one
-- pass (the Jobs page's counts).
SELECT state, count(*) AS n FROM skiplock_jobs
WHERE (:state IS NULL OR state = :state)"""
    + _FILTER
    + "GROUP BY state"
)

JOB_FIND = (
    """
-- Jobs whose unique key or correlation id is exactly :text, newest first (a person's search:
-- no index serves a finished job's key or a correlation id, so this reads the table).
SELECT """
    + _RECORD
    + """
FROM skiplock_jobs WHERE unique_key = :text OR correlation_id = :text
ORDER BY id DESC LIMIT :limit
"""
)

JOB_DEAD_GROUPS = (
    """
-- Dead jobs by task and last error message, the largest groups first.
SELECT task, """
    + _LAST_ERROR
    + """ AS error, count(*) AS n, max(id) AS last_id, max(finished_at) AS last_at
FROM skiplock_jobs_live
WHERE state = 'dead'
GROUP BY 1, 2
ORDER BY n DESC, task, error
LIMIT :limit
"""
)

_PICKED = (
    """
      -- at most the filter's limit, oldest first: the jobs JOB_LIST_OLDEST shows with the
      -- same filter, chosen in this statement (inside the write transaction)
      AND id IN (SELECT id FROM skiplock_jobs_live WHERE state = 'dead'"""
    + _FILTER
    + """ ORDER BY id LIMIT :limit)"""
)

JOB_REQUEUE_DEAD = (
    """
-- A person requeues dead jobs matching a filter: pending now, attempts reset, action recorded.
UPDATE skiplock_jobs_live
SET state = 'pending', attempt = 0, run_at = :now, finished_at = NULL,
    lease_token = NULL, lease_expires_at = NULL, cancel_requested = 0,
    audit = """
    + sqlite_action(":now", ":who", "'requeue'")
    + """
WHERE state = 'dead'"""
    + _PICKED
    + """
      -- one that died waiting for its parents never got them: only its own retry may
      AND NOT EXISTS (SELECT 1 FROM skiplock_unreleased u WHERE u.job_id = skiplock_jobs_live.id)
      -- a dead job whose unique key a live job now holds stays dead (requeueing it would
      -- break the key's promise); the caller reports it
      AND (unique_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM skiplock_jobs_live o
          WHERE o.unique_key = skiplock_jobs_live.unique_key
            AND o.unique_scope = skiplock_jobs_live.unique_scope
            AND """
    + _unique.holds("o.")
    + """))
RETURNING id"""
)

JOB_DISCARD_DEAD = (
    """
-- A person discards dead jobs matching a filter: they become cancelled, action recorded.
UPDATE skiplock_jobs_live
SET state = 'cancelled', finished_at = :now,
    audit = """
    + sqlite_action(":now", ":who", "'discard'")
    + """
WHERE state = 'dead'"""
    + _PICKED
    + "\nRETURNING id"
)

_PAST_RETENTION = """
    WHERE (state IN ('succeeded', 'cancelled') AND finished_at < :finished_before)
       OR (state = 'dead' AND finished_at < :dead_before)
"""

JOB_PRUNE = (
    """
-- Delete one bounded batch of finished rows past their retention.
DELETE FROM skiplock_jobs_live WHERE id IN (
    SELECT id FROM skiplock_jobs_live"""
    + _PAST_RETENTION
    + """    LIMIT :batch
)
"""
)

JOB_PRUNE_PREVIEW = (
    """
-- What JOB_PRUNE would delete now, by state (the same condition).
SELECT state, count(*) AS n FROM skiplock_jobs"""
    + _PAST_RETENTION
    + """GROUP BY state
"""
)

QUEUE_LIMITED = """
-- Queues whose claims must go through their own limit check (concurrency or a rate), or rank
-- by aged priority.
SELECT name FROM skiplock_queues
WHERE NOT paused AND (max_running IS NOT NULL OR rate_per_s IS NOT NULL OR aging_s IS NOT NULL)
"""

QUEUE_LOCK = """
-- One limited queue's limits and recent starts (the write transaction serialises claimers).
SELECT max_running, rate_per_s, paused, recent_starts, aging_s FROM skiplock_queues
WHERE name = :queue
"""

QUEUE_RUNNING = """
-- Jobs of one queue running anywhere.
SELECT count(*) FROM skiplock_jobs_live WHERE queue = :queue AND state = 'running'
"""

QUEUE_STARTS_SET = """
-- Remember a rate-limited queue's starts within its rate's window (a sliding window).
UPDATE skiplock_queues SET recent_starts = :starts WHERE name = :queue
"""

QUEUE_SET_PAUSED = """
-- Pause or resume a queue (creating its settings row if needed).
INSERT INTO skiplock_queues (name, paused, updated_at) VALUES (:name, :paused, :now)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
"""

QUEUE_SET_LIMITS = """
-- Set the given ones (:set_*) of a queue's bound, limits and aging (NULL lifts one), keeping
-- the others and its pause flag. A rate set anew starts its window afresh.
INSERT INTO skiplock_queues (name, max_depth, max_running, rate_per_s, aging_s, updated_at)
VALUES (:name, :max_depth, :max_running, :rate, :aging, :now)
ON CONFLICT (name) DO UPDATE
SET max_depth = CASE WHEN :set_depth THEN excluded.max_depth ELSE max_depth END,
    max_running = CASE WHEN :set_running THEN excluded.max_running ELSE max_running END,
    rate_per_s = CASE WHEN :set_rate THEN excluded.rate_per_s ELSE rate_per_s END,
    aging_s = CASE WHEN :set_aging THEN excluded.aging_s ELSE aging_s END,
    recent_starts = CASE WHEN :set_rate THEN '[]' ELSE recent_starts END,
    updated_at = excluded.updated_at
"""

QUEUE_KNOWN = """
-- Whether a settings row or any job row, finished ones too, names a queue (a person's queue
-- command refuses a name nothing knows: a typo would otherwise make a new queue).
SELECT EXISTS (SELECT 1 FROM skiplock_queues WHERE name = :queue)
    OR EXISTS (SELECT 1 FROM skiplock_jobs WHERE queue = :queue)
"""

_QUEUE_ROW = """
SELECT n.name, q.max_depth, q.max_running, q.rate_per_s, coalesce(q.paused, 0),
       (SELECT count(*) FROM skiplock_jobs_live j WHERE j.queue = n.name AND j.state = 'pending'),
       (SELECT count(*) FROM skiplock_jobs_live j
        WHERE j.queue = n.name AND j.state = 'running' AND j.started_at IS NOT NULL),
       (SELECT count(*) FROM skiplock_jobs_live j
        WHERE j.queue = n.name AND j.state = 'running' AND j.started_at IS NULL),
       q.aging_s
FROM names n LEFT JOIN skiplock_queues q ON q.name = n.name
"""
"""A queue's settings and live counts, never a finished row (as on PostgreSQL)."""

QUEUE_LIST = """
-- Every queue with settings or live jobs: its settings and live counts, reading no history:
-- the pending rows through the per-queue pending index, the running ones through the lease
-- index, each once (a DISTINCT over "state IN (live)" read the whole table).
WITH pending AS (
    SELECT queue, count(*) AS n FROM skiplock_jobs_live WHERE state = 'pending' GROUP BY queue
), running AS (
    SELECT queue, sum(started_at IS NOT NULL) AS started, sum(started_at IS NULL) AS claimed
    FROM skiplock_jobs_live WHERE state = 'running' GROUP BY queue
), names AS (
    SELECT name FROM skiplock_queues UNION SELECT queue FROM pending
    UNION SELECT queue FROM running
)
SELECT n.name, q.max_depth, q.max_running, q.rate_per_s, coalesce(q.paused, 0),
       coalesce(p.n, 0), coalesce(r.started, 0), coalesce(r.claimed, 0), q.aging_s
FROM names n
LEFT JOIN skiplock_queues q ON q.name = n.name
LEFT JOIN pending p ON p.queue = n.name
LEFT JOIN running r ON r.queue = n.name
ORDER BY n.name
"""

QUEUE_INFO = (
    """
-- One queue's settings and live counts (zeros and no limits for a name nothing uses)."""
    + "\nWITH names AS (SELECT :queue AS name)"
    + _QUEUE_ROW
)

TASK_PAUSE = """
-- Pause a task name until a time (the breaker) or until resumed (until NULL).
INSERT INTO skiplock_task_pauses (task, until, reason, created_at)
VALUES (:task, :until, :reason, :now)
ON CONFLICT (task) DO UPDATE SET until = excluded.until, reason = excluded.reason,
                                 created_at = excluded.created_at
"""

TASK_RESUME = """
-- Lift a task's pause.
DELETE FROM skiplock_task_pauses WHERE task = :task
"""

TASK_PAUSES = """
-- Task pauses still in force.
SELECT task, until, reason FROM skiplock_task_pauses
WHERE until IS NULL OR until > :now ORDER BY task
"""

AUDIT_RECORD = """
-- One person action for the audit trail.
INSERT INTO skiplock_audit (at, who, what, target, detail)
VALUES (:now, :who, :what, :target, :detail)
"""

AUDIT_LIST = """
-- The audit trail, newest first, a page before :before (NULL: from the newest).
SELECT id, at, who, what, target, detail FROM skiplock_audit
WHERE :before IS NULL OR id < :before
ORDER BY id DESC LIMIT :limit
"""

AUDIT_PRUNE = """
-- Delete the entries from before :before among the oldest :batch (by id, which follows
-- time): one bounded batch that reads only those rows, however long the trail.
DELETE FROM skiplock_audit WHERE id IN (
    SELECT id FROM (SELECT id, at FROM skiplock_audit ORDER BY id LIMIT :batch)
    WHERE at < :before
)
"""

AUDIT_PRUNE_PREVIEW = """
-- How many entries are from before :before (what pruning the audit trail would delete).
SELECT count(*) FROM skiplock_audit WHERE at < :before
"""

DATA_VERSION = "PRAGMA data_version"
"""Changes whenever another connection has committed to the file (the change watcher)."""


# -- observability: the health numbers and the worker registry (sqlite_observe_sql.py) --

JOB_STATS_NOW = _observe.JOB_STATS_NOW
JOB_STATS_LIVE = _observe.JOB_STATS_LIVE
JOB_STATS_FINISHED = _observe.JOB_STATS_FINISHED
JOB_STATS_RECLAIMS = _observe.JOB_STATS_RECLAIMS
JOB_STATS_PERCENTILES = _observe.JOB_STATS_PERCENTILES
WORKER_BEAT = _observe.WORKER_BEAT
WORKER_DELETE = _observe.WORKER_DELETE
WORKER_PRUNE = _observe.WORKER_PRUNE
WORKER_LIST = _observe.WORKER_LIST

# The cheapest read: it opens the WAL file (which the change watcher then watches).
SCHEMA_PEEK = "SELECT 1 FROM sqlite_master LIMIT 1"
