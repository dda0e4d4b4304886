"""PostgreSQL's statements, one named constant per operation (SQLite's twin has the same names).

``{s}`` is the quoted schema, filled in once when the backend opens. Each statement opens with
its contract. ``$now`` parameters are NULL in production, so the database clock decides; tests
pass a pinned time.

Lock order: a statement that may wait on several job rows locks them in ascending id before
it writes any (``_lock_in_id_order``, ``_PICKED``, JOB_RECLAIM_WORKER), so two of them on the
same rows queue behind each other instead of deadlocking. Claims, the heartbeat,
JOB_RECLAIM_EXPIRED and JOB_PRUNE lock with SKIP LOCKED, which never waits, so they cannot
close a cycle; the rest write one row. tests/backends/test_lock_order.py holds the completion
batch, the supervisor's release and the heartbeat to it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields

from ..job_audit_sql import pg_action
from ..sql_files import Migration, load_migrations
from . import aging_sql as _aging
from . import key_turns_sql as _turns
from . import keys_sql as _keys
from . import observe_sql as _observe
from . import storage_sql as _storage
from . import unique_sql as _unique
from . import workflow_sql as _workflow

MIGRATIONS: list[Migration] = load_migrations("skiplock._backends.postgres")
"""Every released migration, in order: ``migrations/NNNN.sql``, never edited once
released (tests/backends/test_sql_files.py holds each file's checksum)."""


_LIVE = "('pending', 'running')"
"""The live states (JobState.live()), for every statement that names them after the
migrations (a migration's text is history and keeps its own)."""
_FINAL = "('succeeded', 'cancelled', 'dead')"
"""The final states (JobState.final())."""

MIGRATIONS_TABLE = """
-- Record of applied migrations; created before anything else.
CREATE TABLE IF NOT EXISTS {s}.skiplock_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""

MIGRATIONS_LOCK = """
-- Serialise concurrent migrators; transaction-scoped, so nothing leaks through a pooler.
SELECT pg_advisory_xact_lock(hashtext('skiplock_migrate:' || $1))
"""

MIGRATION_VERSIONS = "SELECT version FROM {s}.skiplock_migrations ORDER BY version"

MIGRATION_RECORD = "INSERT INTO {s}.skiplock_migrations (version, name) VALUES ($1, $2)"

MIGRATIONS_TABLE_EXISTS = """
-- Whether skiplock was ever migrated into this schema.
SELECT to_regclass($1 || '.skiplock_migrations') IS NOT NULL
"""

SCHEMA_VERSION = "SELECT coalesce(max(version), 0) FROM {s}.skiplock_migrations"


def _full_queues(batch: str) -> str:
    """A query naming the bounded queues that ``batch`` (rows of queue, n) would overfill.

    Live depth is counted as pending plus running, each on its own partial index (the
    per-queue pending index, the lease index); a single ``state IN (...)`` count has no index
    to read and scans the table.
    """
    return f"""    SELECT q.name FROM {{s}}.skiplock_queues q JOIN {batch} b ON b.queue = q.name
    WHERE q.max_depth IS NOT NULL
      AND b.n + (SELECT count(*) FROM {{s}}.skiplock_jobs j
                 WHERE j.queue = q.name AND j.state = 'pending')
              + (SELECT count(*) FROM {{s}}.skiplock_jobs j
                 WHERE j.queue = q.name AND j.state = 'running') > q.max_depth"""


JOB_INSERT_MANY = (
    """
-- Insert a batch from parallel arrays, all or nothing against bounded queues: a queue whose
-- live depth plus this batch would pass its max_depth comes back as a 'full' row and nothing
-- is inserted. Live unique keys are skipped (looked up by the caller). NOTIFY once per queue,
-- delivered at commit.
WITH batch AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[],
                         $7::float8[], $8::float8[], $9::float8[], $10::text[], $13::float8[],
                         $14::text[], $15::bool[], $16::text[], $17::int[], $18::text[],
                         $19::int[], $20::text[], $21::float8[], $22::int[], $23::text[])
         WITH ORDINALITY AS u(task, queue, args, kwargs, priority, max_attempts, run_at,
                              run_after, timeout, correlation_id, lease_s, unique_key,
                              unique_succeeded, trace_context, payload_version,
                              concurrency_key, key_limit, key_order, unique_for, key_weight,
                              unique_scope, ord)
), full_ AS (
"""
    + _full_queues("(SELECT queue, count(*) AS n FROM batch GROUP BY queue)")
    + """
), ided AS MATERIALIZED (
    -- ids drawn in input order (the caller maps rows back by it); a key already held wastes
    -- its id, which is never reused
    SELECT b.*, nextval('{s}.skiplock_job_ids') AS id
    FROM (SELECT * FROM batch WHERE NOT EXISTS (SELECT 1 FROM full_) ORDER BY ord) b
), keyed AS (
    -- the keys are taken first, in skiplock_keys (a key spans the live and the history
    -- partitions, which no index of the job table can); the insert's trigger finds them held.
    -- A batch's first job of a key (in its key space) takes it; a key whose window has
    -- passed is taken over.
    INSERT INTO {s}.skiplock_keys (unique_key, unique_scope, job_id)
    SELECT DISTINCT ON (unique_key, unique_scope) unique_key, unique_scope, id
    FROM ided WHERE unique_key IS NOT NULL
    ORDER BY unique_key, unique_scope, ord
    ON CONFLICT (unique_key, unique_scope) DO UPDATE
        SET job_id = EXCLUDED.job_id, held_until = NULL
        WHERE {s}.skiplock_keys.held_until <= coalesce($12::timestamptz, now())
    RETURNING job_id
), ins AS (
    INSERT INTO {s}.skiplock_jobs
        (id, task, queue, args, kwargs, priority, max_attempts, run_at, timeout,
         correlation_id, lease_s, unique_key, unique_succeeded, trace_context, payload_version,
         concurrency_key, key_limit, key_order, unique_until, key_weight, unique_scope,
         segment)
    SELECT u.id, u.task, u.queue, u.args::jsonb, u.kwargs::jsonb, u.priority, u.max_attempts,
           coalesce(to_timestamp(u.run_at), coalesce($12::timestamptz, now())
                    + make_interval(secs => coalesce(u.run_after, 0))),
           u.timeout, u.correlation_id, u.lease_s, u.unique_key, u.unique_succeeded,
           u.trace_context, u.payload_version, u.concurrency_key, u.key_limit, u.key_order,
           coalesce($12::timestamptz, now()) + make_interval(secs => u.unique_for),
           u.key_weight, u.unique_scope,
           -- a keyed job goes to the keyed segment, any other to the ring's (the default)
           CASE WHEN u.concurrency_key IS NULL THEN (SELECT """
    + _storage.SEGMENT_NOW
    + ") ELSE "
    + str(_keys.KEYED_SEGMENT)
    + """ END
    FROM ided u
    WHERE u.unique_key IS NULL OR u.id IN (SELECT job_id FROM keyed)
    ORDER BY u.ord
    RETURNING id, queue, unique_key, unique_scope
), woken AS (
    SELECT pg_notify($11, q.queue) FROM (SELECT DISTINCT queue FROM ins) q
)
SELECT 'full' AS kind, NULL::bigint AS id, name AS key, NULL::text AS scope FROM full_
UNION ALL
SELECT 'inserted', id, unique_key, unique_scope FROM ins
WHERE (SELECT count(*) FROM woken) >= 0
ORDER BY id
"""
)

JOB_COPY_PREPARE = (
    """
-- Ahead of a COPY of $3 rows (a large bulk enqueue without unique keys), in its transaction:
-- the bounded queues the batch would overfill ($1 queues, $2 rows for each), and if none,
-- $3 ids drawn from the jobs' identity, the time to schedule from, and a NOTIFY per queue
-- (delivered at commit, dropped if the COPY fails).
WITH batch AS (
    SELECT * FROM unnest($1::text[], $2::int[]) AS b(queue, n)
), full_ AS (
"""
    + _full_queues("batch")
    + """
), ids AS (
    -- regclass resolved once: nextval(text) would look the name up again for every row
    SELECT nextval((SELECT pg_get_serial_sequence('{s}.skiplock_jobs', 'id')::regclass)) AS id
    FROM generate_series(1, $3)
    WHERE NOT EXISTS (SELECT 1 FROM full_)
)
SELECT array(SELECT name FROM full_) AS full,
       array(SELECT id FROM ids) AS ids,
       coalesce($5::timestamptz, now()) AS now,
       """
    + _storage.SEGMENT_NOW
    + """ AS segment,
       (SELECT count(pg_notify($4, queue)) FROM batch WHERE NOT EXISTS (SELECT 1 FROM full_))
           AS woken
"""
)

COPY_COLUMNS = (
    "id task queue args kwargs priority max_attempts run_at timeout correlation_id lease_s"
    " trace_context payload_version segment"
)
"""The columns a bulk enqueue's COPY writes, in its records' order (the rest take defaults).
``segment`` is the live generation read once before the COPY (``JOB_COPY_PREPARE``): a
statement keeps the partitions it first routed to for its whole run, so the column's
default, read anew each row, would name a generation attached after a long COPY began."""

JOB_HOLDER_OF = _unique.JOB_HOLDER_OF
JOB_REPLACE_PENDING = _unique.JOB_REPLACE_PENDING
JOB_RELEASE_RUNNING_KEY = _unique.JOB_RELEASE_RUNNING_KEY

JOB_LIVE_BY_UNIQUE_KEY = """
-- The jobs holding these unique keys ($1) in these key spaces ($2), live, or succeeded where
-- the job asked for that.
SELECT k.job_id AS id, k.unique_key, k.unique_scope FROM {s}.skiplock_keys k
JOIN unnest($1::text[], $2::text[]) AS w(unique_key, unique_scope)
  ON k.unique_key = w.unique_key AND k.unique_scope = w.unique_scope
"""


def _lock_in_id_order(*, skip_locked: bool = False, segments: str | None = None) -> str:
    """The rows of ids $1 still running, locked in ascending id. Its users read it through
    ``id = ANY(ARRAY(SELECT id FROM locked))``: an init plan, so every lock is taken before the
    update's scan returns its first row, and the update stays on the primary key.
    ``segments``: the parameter holding the live segments the rows can be in (NULL: any), so
    the planner reads only those (postgres_storage_sql.py)."""
    where = ""
    if segments is not None:
        where = (
            f"\n      AND ({segments}::smallint[] IS NULL OR segment = ANY({segments}::smallint[]))"
        )
    return (
        """locked AS MATERIALIZED (
    -- Lock order: every statement that may wait on several job rows takes them in ascending
    -- id, here, before it writes any. An UPDATE ... FROM locks rows in its plan's order (the
    -- input array's, the heap's or the index's, as the statistics of the moment decide), so
    -- the completion batch and the heartbeat of one worker, holding the same rows in
    -- opposite orders, deadlocked (a second's stall, an outage logged; the heartbeat now
    -- skips rows held instead, JOB_HEARTBEAT_MANY). FOR NO KEY UPDATE is
    -- what the UPDATE takes anyway. A row that left running meanwhile (its token cleared) is not
    -- locked; the token test, not state = 'running', keeps this off the lease index (a scan
    -- of every running row) and on the primary key.
    -- state IN (...) names the live partition alone (a planner's pruning), which no partial
    -- index matches.
    SELECT id FROM {s}.skiplock_jobs
    WHERE id = ANY($1::bigint[]) AND lease_token IS NOT NULL AND state IN ('pending', 'running')"""
        + where
        + """
    ORDER BY id
    FOR NO KEY UPDATE"""
        + (" SKIP LOCKED" if skip_locked else "")
        + "\n)"
    )


_CLAIM_UPDATE = (
    """UPDATE {s}.skiplock_jobs j
SET state = 'running', attempt = j.attempt + 1, attempted_at = (SELECT t FROM now_),
    ready_at = greatest(j.run_at, j.created_at),
    started_at = NULL, locked_by = $3, lease_token = $4,
    lease_expires_at = (SELECT t FROM now_)
                       + make_interval(secs => coalesce(j.lease_s, coalesce(j.timeout, $5) + $6))
-- id = ANY(ARRAY(...)) keeps the update on the primary key: joining the CTE instead lets the
-- planner hash a scan of the whole table once batches grow past ~50 rows.
-- state IN (...): the live partition alone, and no partial index's predicate (with
-- state = 'pending' the planner may walk a whole pending index for the ids)
WHERE j.id = ANY(ARRAY(SELECT id FROM c)) AND j.state IN ('pending', 'running')
  AND j.segment <> """
    + str(_keys.KEYED_SEGMENT)
    + """  -- the keyed claim's: = (its own segment)
RETURNING j.id, j.task, j.queue, j.args::text AS args, j.kwargs::text AS kwargs, j.priority,
          j.attempt, j.max_attempts, j.timeout, j.lease_token, j.created_at, j.lease_expires_at,
          coalesce(j.lease_s, coalesce(j.timeout, $5) + $6) AS lease_s, j.correlation_id,
          j.trace_context, coalesce(j.payload_version, 1) AS payload_version, j.segment
"""
)
"""What both claims do with the ids their CTE ``c`` picked at the time in ``now_``: running,
attempt + 1, leased to $3 under token $4 for the job's lease, or its timeout (else $5) + $6.
(The keyed claim's function, migrations 13 and 14, holds this text as it was then.)"""

_CLAIM_UPDATE_ORDERED = _CLAIM_UPDATE.replace("j.segment\n", "j.segment, j.run_at\n")
"""``_CLAIM_UPDATE`` returning ``run_at`` too: the ordinary claims' (ClaimedJob's last field),
so rows claimed together start in the claim's order (``in_claim_order``)."""
assert _CLAIM_UPDATE_ORDERED != _CLAIM_UPDATE


def _ready(*, queues: str, limited: str, aged: str = "aging_s IS NOT NULL") -> str:
    """The ready jobs the ordinary claim picks from, in claim order: pending, due by ``now_``,
    in the queues ``queues`` names (NULL: any), none of a paused queue or task, and none of a
    limited queue unless ``limited``, nor of a queue that ``aged`` says ages its priorities
    (those go through their own locked claim)."""
    return f"""SELECT id FROM {{s}}.skiplock_jobs
    WHERE state = 'pending' AND run_at <= (SELECT t FROM now_)
      -- keyed jobs never: their own claim (postgres_keys_sql.py) keeps their keys' limits
      AND segment <> {_keys.KEYED_SEGMENT}
      AND ({queues}::text[] IS NULL OR queue = ANY({queues}::text[]))
      -- paused queues never; limited and aging queues only through their own locked claim
      AND queue NOT IN (SELECT name FROM {{s}}.skiplock_queues
                        WHERE paused OR (NOT {limited} AND (max_running IS NOT NULL
                                                     OR rate_per_s IS NOT NULL OR {aged})))
      AND task NOT IN (SELECT task FROM {{s}}.skiplock_task_pauses
                       WHERE until IS NULL OR until > (SELECT t FROM now_))
    ORDER BY priority DESC, run_at, id"""


JOB_GET_AVAILABLE = (
    """
-- Atomically claim up to $2 ready jobs: running, attempt + 1, leased to $3 under token $4.
-- MATERIALIZED fences the subquery so the planner cannot re-run it and lock extra rows.
WITH now_ AS (SELECT coalesce($7::timestamptz, now()) AS t),
c AS MATERIALIZED (
    """
    + _ready(queues="$1", limited="$8")
    + """
    LIMIT $2
    -- SKIP LOCKED never waits on a row, so a claim cannot deadlock whatever its lock order
    FOR UPDATE SKIP LOCKED
)
"""
    + _CLAIM_UPDATE_ORDERED
)

JOB_GET_AVAILABLE_IN_QUEUES = (
    """
-- JOB_GET_AVAILABLE for the queues in $1 only: each queue's first $2 ready jobs in claim order
-- (an ordered walk of the per-queue pending index that stops at $2, so a flood of one queue
-- costs its claims nothing even when the statistics predate it), merged, first $2 taken.
WITH now_ AS (SELECT coalesce($7::timestamptz, now()) AS t),
c AS MATERIALIZED (
    SELECT p.id FROM unnest($1::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM {s}.skiplock_jobs
        WHERE queue = q.name AND state = 'pending' AND run_at <= (SELECT t FROM now_)
          AND segment <> """
    + str(_keys.KEYED_SEGMENT)
    + """  -- keyed jobs: their own claim
          AND task NOT IN (SELECT task FROM {s}.skiplock_task_pauses
                           WHERE until IS NULL OR until > (SELECT t FROM now_))
        ORDER BY priority DESC, run_at, id
        LIMIT $2
        FOR UPDATE SKIP LOCKED  -- never waits: no deadlock, whatever the order
    ) AS p
    -- paused queues never; limited and aging queues only through their own locked claim ($8)
    WHERE q.name NOT IN (SELECT name FROM {s}.skiplock_queues
                         WHERE paused OR (NOT $8 AND (max_running IS NOT NULL
                                                      OR rate_per_s IS NOT NULL
                                                      OR aging_s IS NOT NULL)))
    ORDER BY p.priority DESC, p.run_at, p.id
    LIMIT $2
)
"""
    + _CLAIM_UPDATE_ORDERED
)

JOB_READY_EXISTS = (
    """
-- Whether the ordinary claim of the queues in $1 (NULL: any) has a ready job to take at $2
-- (NULL: the database's now), locked or not: a claim's SKIP LOCKED passes over rows another
-- session holds for a moment (a rotation moving them to the long segment, an operator's
-- update), so a claim that came up short does not prove nothing is left. A burst worker asks
-- this before it ends. Or the keyed claim: a ready keyed job whose key has room.
WITH now_ AS (SELECT coalesce($2::timestamptz, now()) AS t)
SELECT EXISTS (
    """
    + _ready(queues="$1", limited="false", aged="false")
    + """
) OR EXISTS (
    """
    + _keys.KEYED_READY
    + """
)
"""
)


JOB_GET_AVAILABLE_AGED = _aging.aged_claim(_CLAIM_UPDATE_ORDERED, _keys.KEYED_SEGMENT)

JOB_GET_AVAILABLE_KEYED = """
-- The keyed claim (postgres_key_turns_sql.keyed_claim), in its function: up to $2 ready
-- keyed jobs of the queues in $1 for worker $3 under token $4, leased as the ordinary claim
-- ($5, $6; $7 now), $8 a limited queue's own claim, visiting at most $11 keys after ($9,
-- $10); in the claim's order.
SELECT * FROM {s}.skiplock_keyed_claim($1::text[], $2::integer, $3::text, $4::text,
    $5::float8, $6::float8, $7::timestamptz, $8::boolean, $9::text, $10::text, $11::integer)
ORDER BY place
"""

JOB_BUSIEST_KEYS = _keys.JOB_BUSIEST_KEYS
JOB_BLOCKED_KEYS = _keys.JOB_BLOCKED_KEYS
KEY_TURNS_PRUNE = _turns.KEY_TURNS_PRUNE

JOB_NEXT_RUN_AT = """
-- Seconds from now ($1, NULL: the database's) until the earliest pending job due after
-- now - $3 seconds (the start of the claim that came up short), NULL if none: an idle worker
-- sleeps until then rather than a whole poll interval, and a job that came due between that
-- claim and this read answers <= 0 (claim again at once) instead of being missed. The
-- pending index leads with priority, so a min over run_at would read every pending row: walk
-- its distinct priorities instead (a loose index scan, at most $2 of them) and take each
-- priority's first run_at after the claim, a probe of the same index.
WITH RECURSIVE now_ AS (
    SELECT t, t - make_interval(secs => $3::float8) AS since
    FROM (SELECT coalesce($1::timestamptz, now()) AS t) n
),
p(priority, n) AS (
    SELECT max(priority), 1 FROM {s}.skiplock_jobs WHERE state = 'pending'
    UNION ALL
    SELECT (SELECT max(j.priority) FROM {s}.skiplock_jobs j
            WHERE j.state = 'pending' AND j.priority < p.priority), p.n + 1
    FROM p WHERE p.priority IS NOT NULL AND p.n < $2
)
SELECT extract(epoch FROM min((
    SELECT j.run_at FROM {s}.skiplock_jobs j
    WHERE j.state = 'pending' AND j.priority = p.priority
      AND j.run_at > (SELECT since FROM now_)
    ORDER BY j.run_at LIMIT 1)) - (SELECT t FROM now_))::float8
FROM p WHERE p.priority IS NOT NULL
"""


def _completion(*, release: bool) -> str:
    """JOB_SET_STATE_IF_RUNNING_MANY, and with ``release`` JOB_SET_STATE_AND_RELEASE: the same
    outcomes, and in the same statement the release of the waiting children of the jobs that
    succeeded (postgres_workflow_sql.release_tail, at most $16 edges, $15 the channel that
    wakes workers). The second is for a few outcomes only, on the session with the generic
    plan (postgres.py ``open``): planned for every batch, the release doubled the planning of
    the completion (3.6 ms against 1.8), where a chain's link needs one round trip, not two."""
    succeeded_parented = "c.state <> 'succeeded' AND " if release else ""
    returning_result = ", c.result" if release else ""
    tail = (
        """, p AS (
    SELECT id, result::jsonb AS result FROM done WHERE succeeded
)"""
        + _workflow.release_tail(limit="$16", channel="$15", now="$8")
        + """
SELECT id, parented, parked, succeeded,
       (SELECT count(*) FROM resolved) AS resolved_n,
       (SELECT array_agg(DISTINCT queue) FROM r) AS woken,
       (SELECT array_agg(job_id) FROM stale) AS stale
FROM done WHERE (SELECT count(*) FROM told) >= 0 AND (SELECT count(*) FROM woken) >= 0
"""
        if release
        else """
SELECT id, parented, parked, succeeded FROM done WHERE (SELECT count(*) FROM told) >= 0
"""
    )
    return (
        """
-- Write a batch of outcomes (decided in Python: _transitions.py), each only where the row is
-- still running under its lease token: a worker whose lease was lost changes nothing. Errors
-- are appended, keeping the last $9; $10 holds the results (NULL: none kept), $12 progress
-- reported since the last heartbeat (NULL: none), $13 how long each attempt ran. The finished
-- ids are announced on the completion channel $11, one NOTIFY per 300 ids (a payload stays
-- under PostgreSQL's 8,000 bytes), so a batch of outcomes costs one notification, not one each.
-- $14: the live segments to look for the rows in (those they were claimed from, or the long
-- one, where a rotation moves a job; NULL: any), so only those are read.
WITH now_ AS (SELECT coalesce($8::timestamptz, now()) AS t),
c AS (
    -- A column every row of the batch leaves at its default comes as one NULL (unnest pads
    -- it out): postgres_ops.completion_params.
    SELECT id, token, state, coalesce(attempt_delta, 0) AS attempt_delta, run_after,
           coalesce(finished, true) AS finished, error, result, progress, run_s
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::float8[],
                $6::bool[], $7::text[], $10::text[], $12::text[], $13::float8[])
        AS c(id, token, state, attempt_delta, run_after, finished, error, result, progress,
             run_s)
), """
        + _lock_in_id_order(segments="$14")
        + """, done AS (
    UPDATE {s}.skiplock_jobs j
    SET state = c.state,
        attempt = j.attempt + c.attempt_delta,
        run_at = coalesce((SELECT t FROM now_) + make_interval(secs => c.run_after), j.run_at),
        finished_at = CASE WHEN c.finished THEN (SELECT t FROM now_) END,
        lease_token = NULL,
        lease_expires_at = NULL,
        result = c.result::jsonb,
        progress = coalesce(c.progress::jsonb, j.progress),
        run_s = c.run_s,
        errors = CASE WHEN c.error IS NULL THEN j.errors
                      WHEN jsonb_array_length(j.errors) >= $9
                      THEN (j.errors - 0) || jsonb_build_array(c.error::jsonb)
                      ELSE j.errors || jsonb_build_array(c.error::jsonb) END
    FROM c
    -- A token is set only by a claim and cleared by every way out of running, so matching it
    -- is the fence; id = ANY keeps the plan on the primary key however big the batch, and
    -- the rows it updates are already locked (in id order) by ``locked``.
    -- (state IN: the live partition only; a finished row moves to its history partition)
    WHERE j.id = ANY(ARRAY(SELECT id FROM locked)) AND j.id = c.id AND j.lease_token = c.token
      AND j.state IN ('pending', 'running')
      AND ($14::smallint[] IS NULL OR j.segment = ANY($14::smallint[]))
    -- a finished job with open edges (its children wait for it) and a parked one (it may
    -- have been signalled meanwhile) are followed up by workflow_flows.after_completion
    RETURNING j.id, c.finished"""
        + returning_result
        + """,
              c.finished AND """
        + succeeded_parented
        + """EXISTS (SELECT 1 FROM {s}.skiplock_deps d
                             WHERE d.parent_id = j.id AND d.parent_state IS NULL) AS parented,
              c.state = 'waiting' AS parked, c.state = 'succeeded' AS succeeded
), told AS (
    SELECT pg_notify($11, string_agg(id::text, ',')) FROM (
        SELECT id, (row_number() OVER ()) / 300 AS chunk FROM done WHERE finished
    ) f GROUP BY chunk
)"""
        + tail
    )


JOB_SET_STATE_IF_RUNNING_MANY = _completion(release=False)
JOB_SET_STATE_AND_RELEASE = _completion(release=True)

_RECORD = """id, task, queue, state, args::text AS args, kwargs::text AS kwargs, priority,
       attempt, max_attempts, extract(epoch FROM run_at) AS run_at,
       extract(epoch FROM created_at) AS created_at,
       extract(epoch FROM attempted_at) AS attempted_at,
       extract(epoch FROM finished_at) AS finished_at, locked_by,
       extract(epoch FROM lease_expires_at) AS lease_expires_at, errors::text AS errors,
       correlation_id, audit::text AS audit, extract(epoch FROM started_at) AS started_at,
       result::text AS result, progress::text AS progress, payload_version, unique_key,
       extract(epoch FROM unique_until) AS unique_until, concurrency_key, key_limit,
       key_order, key_weight"""
"""An inspection read's columns (common.RECORD_COLUMNS): times as exact epoch seconds, which
any timestamptz has, even one beyond the driver's datetime range ('infinity', year 20000)."""

JOB_GET = (
    """
-- One job row, for inspection.
SELECT """
    + _RECORD
    + """
FROM {s}.skiplock_jobs WHERE id = $1
"""
)

JOB_OUTCOME_MANY = """
-- Where the waited-for jobs $1 stand: state, the result of a succeeded one, the last error of
-- a finished one. One primary-key probe per id.
SELECT id, state, CASE WHEN state = 'succeeded' THEN result::text END AS result,
       CASE WHEN state IN ('cancelled', 'dead') THEN (errors -> -1)::text END AS last_error
FROM {s}.skiplock_jobs WHERE id = ANY($1::bigint[])
"""

JOB_COUNT_BY_STATE = """
-- Jobs per state, optionally for one queue; running jobs not yet started count as claimed.
SELECT CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END AS state,
       count(*) AS n
FROM {s}.skiplock_jobs
WHERE ($1::text IS NULL OR queue = $1) /*part*/ GROUP BY 1
"""

JOB_COUNT_BY_QUEUE = """
-- Jobs per queue and state (running jobs not yet started count as claimed): the Overview's.
SELECT queue,
       CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END AS state,
       count(*) AS n
FROM {s}.skiplock_jobs
WHERE true /*part*/ GROUP BY 1, 2
"""

JOB_RETRY = (
    """
-- A person requeues a finished job: pending now, attempts reset, then wake the workers. A
-- key its window no longer holds goes first (the job's trigger takes it after this statement).
WITH freed AS (
    DELETE FROM {s}.skiplock_keys k
    WHERE k.held_until <= coalesce($3::timestamptz, now())
      AND (k.unique_key, k.unique_scope) = (SELECT j.unique_key, """
    + _unique.SCOPE_OF.format(j="j")
    + """
                                            FROM {s}.skiplock_jobs j
                                            WHERE j.id = $1 AND j.state IN """
    + _FINAL
    + """)
), r AS (
    UPDATE {s}.skiplock_jobs
    SET state = 'pending', attempt = 0, run_at = coalesce($3::timestamptz, now()),
        finished_at = NULL, result = NULL, progress = NULL, lease_token = NULL,
        lease_expires_at = NULL,
        cancel_requested = false,
        audit = """
    + pg_action("coalesce($3::timestamptz, now())", "$4::text", "'retry'")
    + """
    WHERE id = $1 AND state IN """
    + _FINAL
    + """
      -- one that ended waiting for its parents waits for them again instead
      -- (workflow_flows.retry_unreleased): never pending without their results
      AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_unreleased u WHERE u.job_id = $1)
    RETURNING queue
)
SELECT pg_notify($2, queue) FROM r
"""
)

_RECLAIM_UPDATE = """UPDATE {s}.skiplock_jobs j
SET state = CASE WHEN j.cancel_requested THEN 'cancelled'
                 WHEN j.attempt >= j.max_attempts THEN 'dead' ELSE 'pending' END,
    finished_at = CASE WHEN j.cancel_requested OR j.attempt >= j.max_attempts
                       THEN (SELECT t FROM now_) END,
    -- run_at kept: a reclaimed job keeps its place among the ready (its priority, its age)
    lease_token = NULL, lease_expires_at = NULL,
    reclaims = j.reclaims + 1, reclaimed_at = (SELECT t FROM now_), run_s = NULL,
    errors = CASE WHEN jsonb_array_length(j.errors) >= $2 THEN j.errors - 0 ELSE j.errors END
             || jsonb_build_array(jsonb_build_object(
                    'attempt', j.attempt, 'at', (SELECT t FROM now_),
                    'message', {why},
                    'traceback', NULL))
FROM x WHERE j.id = x.id AND j.state IN ('pending', 'running')
RETURNING j.id, j.task, j.queue, j.state, j.attempt, j.max_attempts, j.correlation_id,
          j.locked_by
"""
"""What both reclaims do with the rows their CTE ``x`` picked at the time in ``now_``: the
attempt stays spent; pending, or dead when attempts are spent, or cancelled when a person
asked; the error ``{why}`` recorded (keeping the last $2). ``run_at`` is left as it was, so a
pending one goes back to its place (before jobs enqueued after it, aged by its whole wait);
its next claim's ``ready_at`` (and so its claim latency) counts from that place too."""

JOB_RECLAIM_EXPIRED = """
-- Return rows whose lease expired to pending (or dead when attempts are spent; cancelled when a
-- person asked to cancel them, whose worker is gone), noting why; each row as it now stands,
-- locked_by still the worker that lost it (for the reclaim's log event).
-- SKIP LOCKED: concurrent reclaimers split the rows instead of acting on one twice, and it
-- never waits on a row, so lease order is safe here (no deadlock with an id-ordered lock).
WITH now_ AS (SELECT coalesce($1::timestamptz, now()) AS t),
x AS MATERIALIZED (
    SELECT id FROM {s}.skiplock_jobs
    WHERE state = 'running' AND lease_expires_at < (SELECT t FROM now_)
    ORDER BY lease_expires_at LIMIT 1000
    FOR UPDATE SKIP LOCKED
)
""" + _RECLAIM_UPDATE.replace(
    "{why}",
    "'lease expired (worker ' || coalesce(j.locked_by, '?') || ' stopped heartbeating)'",
)

JOB_RECLAIM_WORKER = """
-- JOB_RECLAIM_EXPIRED for every lease of worker $3 (its token prefix: tokens are
-- '<worker id>:<claim>'), expired or not: its supervisor saw it exit, or another worker saw
-- it is gone, so nothing renews them; the error reads 'worker <locked_by> ' || $4.
-- A row a live worker holds has another token and is never touched (fencing unchanged).
WITH now_ AS (SELECT coalesce($1::timestamptz, now()) AS t),
x AS MATERIALIZED (
    SELECT id FROM {s}.skiplock_jobs
    WHERE state = 'running' AND lease_expires_at IS NOT NULL
      AND left(lease_token, length($3) + 1) = $3 || ':'
    -- it waits for rows a heartbeat or a person holds, so it locks in their order (id)
    ORDER BY id
    FOR NO KEY UPDATE
)
""" + _RECLAIM_UPDATE.replace("{why}", "'worker ' || coalesce(j.locked_by, '?') || ' ' || $4::text")

JOB_HEARTBEAT_MANY = (
    """
-- Extend the leases of (id, token) pairs still running, marking those started ($6) that were
-- not yet and storing the progress records $7 given (NULL: none new); the pairs returned are
-- still held. SKIP LOCKED: a row another statement holds this instant (nearly always this
-- worker's own outcome batch, which moves it to history) is not waited for. Waiting on it
-- then met the row moved to another partition, which PostgreSQL refuses to lock (SQLSTATE
-- 40001), and under load every retry of a batch of hundreds met another. Never waiting, the
-- heartbeat cannot deadlock either, in any order. A skipped row still under its token is
-- reported held (a read of the statement's snapshot) and extended at the next beat; its
-- progress record, if this beat carried one, waits for the job's next (a finished job's
-- record rides its outcome instead).
-- $8: the live segments to look for the rows in (those the jobs were claimed from and the
-- long one, where a rotation moves a job that runs past its segment's turn; NULL: every one).
WITH now_ AS (SELECT coalesce($5::timestamptz, now()) AS t),
h AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $6::boolean[], $7::text[])
        AS h(id, token, started, progress)
),
"""
    + _lock_in_id_order(skip_locked=True, segments="$8")
    + """,
beat AS (
    UPDATE {s}.skiplock_jobs j
    SET lease_expires_at = (SELECT t FROM now_) + make_interval(
            secs => coalesce(j.lease_s, coalesce(j.timeout, $3) + $4)),
        started_at = CASE WHEN h.started THEN coalesce(j.started_at, (SELECT t FROM now_))
                          ELSE j.started_at END,
        progress = coalesce(h.progress::jsonb, j.progress)
    FROM h
    WHERE j.id = ANY(ARRAY(SELECT id FROM locked)) AND j.id = h.id AND j.lease_token = h.token
      AND j.state IN ('pending', 'running')
      AND ($8::smallint[] IS NULL OR j.segment = ANY($8::smallint[]))
    RETURNING j.id, j.lease_token
)
SELECT id, lease_token FROM beat
UNION ALL
SELECT j.id, j.lease_token FROM {s}.skiplock_jobs j JOIN h ON h.id = j.id
WHERE j.id = ANY($1::bigint[]) AND j.state IN ('pending', 'running')
  AND ($8::smallint[] IS NULL OR j.segment = ANY($8::smallint[]))
  AND j.lease_token = h.token
  -- an anti-join (a hash of the locked ids): <> ALL(ARRAY(...)) compared every pair, a
  -- second of CPU for a worker holding 5,000 leases
  AND NOT EXISTS (SELECT 1 FROM locked l WHERE l.id = j.id)
"""
)

CRON_SLOT_INSERT = """
-- Claim one slot of one schedule; no row back means another scheduler already has it.
INSERT INTO {s}.skiplock_cron_slots (schedule, slot) VALUES ($1, $2)
ON CONFLICT DO NOTHING RETURNING 1
"""

CRON_SLOT_INSERT_AT = """
-- Claim one slot with the time the claim was made given (Django's PeriodicDefer.created).
INSERT INTO {s}.skiplock_cron_slots (schedule, slot, created_at)
VALUES ($1, $2, coalesce($3::timestamptz, now()))
ON CONFLICT DO NOTHING RETURNING 1
"""

CRON_PREVIOUS_RUN_LIVE = (
    """
-- Whether a job this schedule enqueued is still pending or running (for overlap=False).
SELECT EXISTS (
    SELECT 1 FROM {s}.skiplock_cron_slots c JOIN {s}.skiplock_jobs j ON j.id = c.job_id
    WHERE c.schedule = $1 AND j.state IN """
    + _LIVE
    + """
)
"""
)

CRON_SLOT_SET_OUTCOME = """
-- Record what the claimed slot did: the job it enqueued, or that it was skipped.
UPDATE {s}.skiplock_cron_slots SET job_id = $3, skipped = $4 WHERE schedule = $1 AND slot = $2
"""

CRON_LAST_SLOTS = """
-- The most recent slot claimed per schedule.
SELECT schedule, max(slot) AS slot FROM {s}.skiplock_cron_slots GROUP BY schedule
"""

CRON_LAST_RUNS = """
-- Each schedule's most recent slot and the job it enqueued.
SELECT DISTINCT ON (schedule) schedule, slot, job_id
FROM {s}.skiplock_cron_slots ORDER BY schedule, slot DESC
"""

JOB_IMPORT_OUTCOME = """
-- A finished task moved in from another queue's table (Django's import_tasks_db): the row
-- just inserted pending in this transaction takes the outcome it had there.
UPDATE {s}.skiplock_jobs
SET state = $2, attempt = $3, created_at = $4, attempted_at = $5, started_at = $5,
    finished_at = $6, result = $7::jsonb, errors = $8::jsonb, locked_by = $9
WHERE id = $1 AND state = 'pending'
"""

CRON_SLOTS_PRUNE = """
-- Forget slots older than the cut-off.
DELETE FROM {s}.skiplock_cron_slots WHERE slot < $1
"""

JOB_CANCEL = (
    """
-- A person cancels a job: pending or waiting -> cancelled at once; running -> flagged for its
-- worker (a waiting job's children follow their on_parent_failure at the next release); a
-- running job already flagged is left as it is (a repeated cancel is in skiplock_audit only:
-- a loop of cancels never rewrites the row). A job
-- that waited for its parents keeps what their release would have given it, for a retry
-- (skiplock_unreleased): its row locked first, so a release racing this cancel either made it
-- pending before (nothing kept) or finds it cancelled after.
WITH now_ AS (SELECT coalesce($3::timestamptz, now()) AS t),
was AS (SELECT id, state FROM {s}.skiplock_jobs WHERE id = $1 FOR UPDATE),
kept AS (
    INSERT INTO {s}.skiplock_unreleased (job_id, pass_results, batch_id, ended_at)
    SELECT w.job_id, w.pass_results, w.batch_id, (SELECT t FROM now_)
    FROM {s}.skiplock_waits w JOIN was ON was.id = w.job_id
    WHERE was.state = 'waiting' AND w.signal IS NULL
    ON CONFLICT (job_id) DO NOTHING
)
UPDATE {s}.skiplock_jobs
SET state = CASE WHEN state IN ('pending', 'waiting') THEN 'cancelled' ELSE state END,
    finished_at = CASE WHEN state IN ('pending', 'waiting') THEN (SELECT t FROM now_)
                       ELSE finished_at END,
    cancel_requested = true,
    audit = """
    + pg_action("(SELECT t FROM now_)", "$2::text", "'cancel'")
    + """
-- through ``was``: read (and locked) before this update changes the row, which ``kept``
-- (run once this update is done) could no longer lock
WHERE id = (SELECT id FROM was) AND state IN ('pending', 'running', 'waiting')
  AND NOT (state = 'running' AND cancel_requested)
RETURNING state
"""
)

JOB_CANCEL_REQUESTED = """
-- Which of the jobs a worker holds a person asked to cancel.
SELECT id FROM {s}.skiplock_jobs
WHERE id = ANY($1::bigint[]) AND state = 'running' AND cancel_requested
"""

_ERROR_MATCH = """CASE WHEN jsonb_typeof(errors) = 'array' THEN EXISTS (
      SELECT 1 FROM jsonb_array_elements(errors) e
      WHERE strpos(lower(e ->> 'message'), lower($5)) > 0) ELSE false END"""
"""A person's ``error`` filter ($5): a literal substring of a recorded error's decoded message,
in any case (``lower`` under the database's ctype), never of the JSON around it. Another
producer's row whose errors are not an array matches nothing rather than failing the read."""

_LAST_ERROR = "coalesce(errors -> -1 ->> 'message', '')"
"""A job's last recorded error message, '' if none: a dead-letter group's key (JOB_DEAD_GROUPS)
and the ``last_error`` filter ($8), which matches it exactly, so a group's action reaches
that group and no other whose message merely contains it."""

_LIST_WHERE = (
    """
WHERE ($1::text IS NULL OR state = $1)
  AND ($2::bigint[] IS NULL OR id = ANY($2))
  AND ($3::text IS NULL OR task = $3)
  AND ($4::text IS NULL OR queue = $4)
  AND ($5::text IS NULL OR """
    + _ERROR_MATCH
    + """)
  AND ($6::timestamptz IS NULL OR coalesce(finished_at, created_at) >= $6)
  AND ($7::timestamptz IS NULL OR coalesce(finished_at, created_at) < $7)
  AND ($8::text IS NULL OR """
    + _LAST_ERROR
    + """ = $8) /*part*/
"""
)
"""The filter of a person's reads. ``/*part*/`` is where a read of every state in two parts
(``postgres_reads``) says which: the live partition, or the rest."""

JOB_LIST = (
    """
-- Jobs matching a filter, newest first; every condition is optional. $10 pages by keyset
-- (ids below the previous page's last): a backward walk of the primary key from there, never
-- OFFSET (a range on id, not "IS NULL OR", so even a generic plan seeks to it).
SELECT """
    + _RECORD
    + """
FROM {s}.skiplock_jobs"""
    + _LIST_WHERE
    + """  AND id < coalesce($10::bigint, 9223372036854775807)
ORDER BY id DESC
LIMIT $9
"""
)

JOB_LIST_OLDEST = (
    """
-- Jobs matching a filter, oldest first: the ones a bulk action with the same filter and
-- limit acts on ($10 pages forward: ids above the previous page's last).
SELECT """
    + _RECORD
    + """
FROM {s}.skiplock_jobs"""
    + _LIST_WHERE
    + """  AND id > coalesce($10::bigint, 0)
ORDER BY id
LIMIT $9
"""
)

JOB_COUNT = (
    """
-- How many jobs match JOB_LIST's filter (a bulk action's preview).
SELECT count(*) FROM {s}.skiplock_jobs"""
    + _LIST_WHERE
)

JOB_COUNT_STATES = (
    """
-- How many jobs match JOB_LIST's filter in each state ($1 is NULL: every state), in one
-- pass of each partition read (the Jobs page's counts).
SELECT state, count(*) AS n FROM {s}.skiplock_jobs"""
    + _LIST_WHERE
    + """GROUP BY state
"""
)

JOB_FIND = (
    """
-- Jobs whose unique key or correlation id is exactly $1, newest first (a person's search:
-- no index serves a finished job's key or a correlation id, so this reads the table).
SELECT """
    + _RECORD
    + """
FROM {s}.skiplock_jobs WHERE (unique_key = $1 OR correlation_id = $1) /*part*/
ORDER BY id DESC LIMIT $2
"""
)

JOB_DEAD_GROUPS = (
    """
-- Dead jobs by task and last error message, the largest groups first: the dead partition by
-- name, so no other is planned or locked.
SELECT task, """
    + _LAST_ERROR
    + """ AS error, count(*) AS n,
       max(id) AS last_id, extract(epoch FROM max(finished_at)) AS last_at
FROM {s}.skiplock_jobs_dead
WHERE state = 'dead'
GROUP BY 1, 2
ORDER BY n DESC, task, error
LIMIT $1
"""
)

_DEAD_FILTER = (
    """
  AND ($2::bigint[] IS NULL OR id = ANY($2))
  AND ($3::text IS NULL OR task = $3)
  AND ($4::text IS NULL OR queue = $4)
  AND ($5::text IS NULL OR """
    + _ERROR_MATCH
    + """)
  AND ($6::timestamptz IS NULL OR finished_at >= $6)
  AND ($7::timestamptz IS NULL OR finished_at < $7)
  AND ($8::text IS NULL OR """
    + _LAST_ERROR
    + """ = $8)
"""
)

_PICKED = (
    """
-- at most the filter's limit ($limit), oldest first: the jobs JOB_LIST_OLDEST shows with the
-- same filter, chosen and locked in this statement (a row another session changes meanwhile
-- is re-checked against the filter and dropped, never replaced by one past the limit),
-- locked in id order like every statement that may wait on several job rows
picked AS (
    SELECT id FROM {s}.skiplock_jobs
    WHERE state = 'dead'"""
    + _DEAD_FILTER
    + """    ORDER BY id
    LIMIT $limit
    FOR NO KEY UPDATE
)"""
)

_KEY_FREE = (
    """
  -- a dead job whose unique key a live job now holds stays dead (requeueing it would break
  -- the key's promise); the caller reports it
  AND (unique_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM {s}.skiplock_keys k WHERE k.unique_key = skiplock_jobs.unique_key
        AND k.unique_scope = """
    + _unique.SCOPE_OF.format(j="skiplock_jobs")
    + """
        AND """
    + _unique.HELD.format(now="(SELECT t FROM now_)")
    + """))
"""
)

_KEYS_PASSED = (
    """
-- the key rows of the picked jobs' keys whose windows have passed go first: the requeued
-- job's trigger takes its key after this statement's changes
freed AS (
    DELETE FROM {s}.skiplock_keys k
    WHERE k.held_until <= (SELECT t FROM now_)
      AND (k.unique_key, k.unique_scope) IN (
          SELECT j.unique_key, """
    + _unique.SCOPE_OF.format(j="j")
    + """ FROM {s}.skiplock_jobs j
          WHERE j.state = 'dead' AND j.id IN (SELECT id FROM picked))
),"""
)

JOB_REQUEUE_DEAD = (
    """
-- A person requeues dead jobs matching a filter: pending now, attempts reset, action recorded.
WITH now_ AS (SELECT coalesce($9::timestamptz, now()) AS t),
"""
    + _PICKED.replace("$limit", "$11")
    + ","
    + _KEYS_PASSED
    + """
r AS (
    UPDATE {s}.skiplock_jobs
    SET state = 'pending', attempt = 0, run_at = (SELECT t FROM now_), finished_at = NULL,
        lease_token = NULL, lease_expires_at = NULL, cancel_requested = false,
        audit = """
    + pg_action("(SELECT t FROM now_)", "$1::text", "'requeue'")
    + """
    WHERE state = 'dead' AND id IN (SELECT id FROM picked)
      -- one that died waiting for its parents (a body buried for the size of their
      -- results) never got them: only its own retry (job retry) may send it back
      AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_unreleased u
                      WHERE u.job_id = {s}.skiplock_jobs.id)"""
    + _KEY_FREE
    + """    RETURNING id, queue
), woken AS (
    SELECT pg_notify($10, q.queue) FROM (SELECT DISTINCT queue FROM r) q
)
SELECT id FROM r WHERE (SELECT count(*) FROM woken) >= 0 ORDER BY id
"""
)

JOB_DISCARD_DEAD = (
    """
-- A person discards dead jobs matching a filter: they become cancelled, action recorded.
WITH now_ AS (SELECT coalesce($9::timestamptz, now()) AS t),
"""
    + _PICKED.replace("$limit", "$10")
    + """,
d AS (
    UPDATE {s}.skiplock_jobs
    SET state = 'cancelled', finished_at = (SELECT t FROM now_),
        audit = """
    + pg_action("(SELECT t FROM now_)", "$1::text", "'discard'")
    + """
    WHERE state = 'dead' AND id IN (SELECT id FROM picked)
    RETURNING id
)
-- in id order: the rows move to another partition, which returns them in its own
SELECT id FROM d ORDER BY id
"""
)

_PAST_RETENTION = """
    WHERE (state IN ('succeeded', 'cancelled')
           AND finished_at < coalesce($3::timestamptz, now()) - $1::float8 * interval '1 second')
       OR (state = 'dead'
           AND finished_at < coalesce($3::timestamptz, now()) - $2::float8 * interval '1 second')
"""

JOB_PRUNE = (
    """
-- Delete one bounded batch ($4 rows) of finished rows past their retention ($1, $2 seconds
-- of the database clock); SKIP LOCKED keeps concurrent pruners off each other's rows and
-- every lock short, and never waits, so it cannot deadlock.
DELETE FROM {s}.skiplock_jobs
WHERE state IN ('succeeded', 'cancelled', 'dead') AND id IN (
    SELECT id FROM {s}.skiplock_jobs"""
    + _PAST_RETENTION
    + """    LIMIT $4
    FOR UPDATE SKIP LOCKED
)
"""
)

JOB_PRUNE_PREVIEW = (
    """
-- What JOB_PRUNE would delete now, by state: the same condition, so a dry run counts
-- exactly the rows the real run's rule takes.
SELECT state, count(*) AS n FROM {s}.skiplock_jobs"""
    + _PAST_RETENTION
    + """GROUP BY state
"""
)

QUEUE_LIMITED = """
-- Queues whose claims must go through their row lock (global concurrency or a rate, or
-- priority aging: its order is read and taken under the lock).
SELECT name FROM {s}.skiplock_queues
WHERE NOT paused AND (max_running IS NOT NULL OR rate_per_s IS NOT NULL OR aging_s IS NOT NULL)
"""

QUEUE_LOCK = """
-- Serialise claimers of one limited queue; the row's limits and recent starts.
SELECT max_running, rate_per_s, paused, recent_starts,
       extract(epoch FROM coalesce($2::timestamptz, now()))::float8 AS now, aging_s
FROM {s}.skiplock_queues WHERE name = $1 FOR UPDATE
"""

QUEUE_RUNNING = """
-- Jobs of one queue running anywhere.
SELECT count(*) FROM {s}.skiplock_jobs WHERE queue = $1 AND state = 'running'
"""

QUEUE_STARTS_SET = """
-- Remember a rate-limited queue's starts within its rate's window (a sliding window).
UPDATE {s}.skiplock_queues SET recent_starts = $2 WHERE name = $1
"""

QUEUE_SET_PAUSED = """
-- Pause or resume a queue (creating its settings row if needed).
INSERT INTO {s}.skiplock_queues (name, paused) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = now()
"""

QUEUE_SET_LIMITS = """
-- Set the given ones ($6: max_depth, max_running, rate_per_s, aging_s) of a queue's bound,
-- limits and aging (NULL lifts one), keeping the others and its pause flag. A rate set anew
-- starts its window afresh.
INSERT INTO {s}.skiplock_queues AS q (name, max_depth, max_running, rate_per_s, aging_s)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (name) DO UPDATE
SET max_depth = CASE WHEN 'max_depth' = ANY($6::text[]) THEN excluded.max_depth
                     ELSE q.max_depth END,
    max_running = CASE WHEN 'max_running' = ANY($6::text[]) THEN excluded.max_running
                       ELSE q.max_running END,
    rate_per_s = CASE WHEN 'rate_per_s' = ANY($6::text[]) THEN excluded.rate_per_s
                      ELSE q.rate_per_s END,
    aging_s = CASE WHEN 'aging_s' = ANY($6::text[]) THEN excluded.aging_s ELSE q.aging_s END,
    recent_starts = CASE WHEN 'rate_per_s' = ANY($6::text[]) THEN '{}' ELSE q.recent_starts END,
    updated_at = now()
"""

QUEUE_KNOWN = """
-- Whether a settings row or any job row, finished ones too, names a queue (a person's queue
-- command refuses a name nothing knows: a typo would otherwise make a new queue). A name
-- with rows stops at its first; only an unknown one reads the whole table, once.
SELECT EXISTS (SELECT 1 FROM {s}.skiplock_queues WHERE name = $1)
    OR EXISTS (SELECT 1 FROM {s}.skiplock_jobs WHERE queue = $1)
"""

_QUEUE_ROW = """
SELECT n.name, q.max_depth, q.max_running, q.rate_per_s, coalesce(q.paused, false) AS paused,
       (SELECT count(*) FROM {s}.skiplock_jobs j
        WHERE j.queue = n.name AND j.state = 'pending') AS pending,
       (SELECT count(*) FROM {s}.skiplock_jobs j
        WHERE j.queue = n.name AND j.state = 'running' AND j.started_at IS NOT NULL) AS running,
       (SELECT count(*) FROM {s}.skiplock_jobs j
        WHERE j.queue = n.name AND j.state = 'running' AND j.started_at IS NULL) AS claimed,
       q.aging_s
FROM names n LEFT JOIN {s}.skiplock_queues q ON q.name = n.name
"""
"""A queue's settings and live counts, never a finished row: pending through the per-queue
pending index, running and claimed through the lease index (running rows only)."""

QUEUE_LIST = """
-- Every queue with settings or live jobs: its settings and live counts, reading no history:
-- the pending rows through the per-queue pending index, the running ones through the lease
-- index, each once (a DISTINCT over "state IN (live)" read the whole table, and per-queue
-- subqueries priced it past JIT's threshold: ~1 s of compiling for a sub-millisecond read).
WITH pending AS (
    SELECT queue, count(*) AS n FROM {s}.skiplock_jobs WHERE state = 'pending' GROUP BY queue
), running AS (
    SELECT queue, count(*) FILTER (WHERE started_at IS NOT NULL) AS started,
           count(*) FILTER (WHERE started_at IS NULL) AS claimed
    FROM {s}.skiplock_jobs WHERE state = 'running' GROUP BY queue
), names AS (
    SELECT name FROM {s}.skiplock_queues UNION SELECT queue FROM pending
    UNION SELECT queue FROM running
)
SELECT n.name, q.max_depth, q.max_running, q.rate_per_s, coalesce(q.paused, false) AS paused,
       coalesce(p.n, 0) AS pending, coalesce(r.started, 0) AS running,
       coalesce(r.claimed, 0) AS claimed, q.aging_s
FROM names n
LEFT JOIN {s}.skiplock_queues q ON q.name = n.name
LEFT JOIN pending p ON p.queue = n.name
LEFT JOIN running r ON r.queue = n.name
ORDER BY n.name
"""

QUEUE_INFO = (
    """
-- One queue's settings and live counts (zeros and no limits for a name nothing uses)."""
    + "\nWITH names AS (SELECT $1::text AS name)"
    + _QUEUE_ROW
)

TASK_PAUSE = """
-- Pause a task name for $2 seconds of the database clock (the breaker) or until resumed
-- ($2 NULL: until NULL).
INSERT INTO {s}.skiplock_task_pauses (task, until, reason)
VALUES ($1, coalesce($4::timestamptz, now()) + $2::float8 * interval '1 second', $3)
ON CONFLICT (task) DO UPDATE SET until = excluded.until, reason = excluded.reason,
                                 created_at = now()
"""

TASK_RESUME = """
-- Lift a task's pause; no row back means it was not paused.
DELETE FROM {s}.skiplock_task_pauses WHERE task = $1 RETURNING task
"""

TASK_PAUSES = """
-- Task pauses still in force.
SELECT task, until, reason FROM {s}.skiplock_task_pauses
WHERE until IS NULL OR until > coalesce($1::timestamptz, now())
ORDER BY task
"""

AUDIT_RECORD = """
-- One person action for the audit trail, at the database's time.
INSERT INTO {s}.skiplock_audit (at, who, what, target, detail)
VALUES (coalesce($5::timestamptz, now()), $1, $2, $3, $4)
"""

AUDIT_LIST = """
-- The audit trail, newest first, a page before id $2 (NULL: from the newest).
SELECT id, at, who, what, target, detail FROM {s}.skiplock_audit
WHERE $2::bigint IS NULL OR id < $2
ORDER BY id DESC LIMIT $1
"""

AUDIT_PRUNE = """
-- Delete the entries older than $1 seconds among the oldest $3 (by id, which follows time):
-- one bounded batch that reads only those rows, however long the trail.
DELETE FROM {s}.skiplock_audit WHERE id IN (
    SELECT id FROM (SELECT id, at FROM {s}.skiplock_audit ORDER BY id LIMIT $3) oldest
    WHERE at < coalesce($2::timestamptz, now()) - make_interval(secs => $1)
)
"""

AUDIT_PRUNE_PREVIEW = """
-- How many entries are older than $1 seconds (what pruning the audit trail would delete).
SELECT count(*) FROM {s}.skiplock_audit
WHERE at < coalesce($2::timestamptz, now()) - make_interval(secs => $1)
"""


# -- observability: the health numbers and the worker registry (postgres_observe_sql.py) --

JOB_STATS_NOW = _observe.JOB_STATS_NOW
JOB_STATS_LIVE = _observe.JOB_STATS_LIVE
JOB_STATS_WAITING = _observe.JOB_STATS_WAITING
JOB_STATS_FINISHED = _observe.JOB_STATS_FINISHED
JOB_STATS_RECLAIMS = _observe.JOB_STATS_RECLAIMS
JOB_STATS_RECLAIMS_REST = _observe.JOB_STATS_RECLAIMS_REST
JOB_STATS_PERCENTILES = _observe.JOB_STATS_PERCENTILES
JOB_STATS_PERCENTILES_REST = _observe.JOB_STATS_PERCENTILES_REST
WORKER_BEAT = _observe.WORKER_BEAT
WORKER_DELETE = _observe.WORKER_DELETE
WORKER_PRUNE = _observe.WORKER_PRUNE
WORKER_LIST = _observe.WORKER_LIST


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement above for one schema, read as attributes (a misspelt name is a mypy
    error, where a string key was a KeyError at run time); tests check none is left out."""

    MIGRATIONS_TABLE: str
    MIGRATIONS_LOCK: str
    MIGRATION_VERSIONS: str
    MIGRATION_RECORD: str
    MIGRATIONS_TABLE_EXISTS: str
    SCHEMA_VERSION: str
    JOB_INSERT_MANY: str
    JOB_COPY_PREPARE: str
    JOB_LIVE_BY_UNIQUE_KEY: str
    JOB_HOLDER_OF: str
    JOB_REPLACE_PENDING: str
    JOB_RELEASE_RUNNING_KEY: str
    JOB_GET_AVAILABLE: str
    JOB_GET_AVAILABLE_IN_QUEUES: str
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
    quoted = f'"{schema}"'
    return Statements(
        **{f.name: globals()[f.name].replace("{s}", quoted) for f in fields(Statements)}
    )
