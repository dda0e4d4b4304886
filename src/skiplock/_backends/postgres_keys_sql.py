"""PostgreSQL's concurrency keys: the keyed segment of the live partition and its claim.

A job enqueued with ``concurrency_key`` may run only while fewer than its ``key_limit`` jobs
with that key run anywhere (docs/design.md, "Concurrency keys"). Three parts make that hold:

- **Its own segment.** Keyed jobs are written to segment ``KEYED_SEGMENT`` of the live
  partition (``skiplock_jobs_live_keyed``), never rotated, and every other segment holds
  unkeyed jobs only (a check constraint on the live partition). The ordinary claims name the
  other segments, so the planner leaves the keyed one out: a backlog of 100,000 keyed jobs
  costs an ordinary claim nothing. Every other statement (counts, stats, a person's actions)
  reads the keyed segment like any other.
- **A walk over keys.** The keyed claim visits the keys with pending jobs in (queue, key)
  order from where the previous claim stopped (a loose scan of the segment's walk index: one
  probe a key, however many jobs each has), takes at most ``limit - running`` of each, and
  orders what it found by priority, then by the key's turn, then by age. A hot key with
  100,000 ready jobs takes one turn like a key with one.
- **A lock per key, then a fresh count.** ``skiplock_key_running`` takes a transaction-level
  advisory try-lock on the key (another claimer holding it: the key is skipped, never waited
  for) and only then counts the key's running jobs, in a statement of its own: a VOLATILE
  function's statements read a snapshot taken when each begins, so the count sees every
  claim committed before the lock was free. Counting in the claim's own snapshot would let
  two claimers both see a free slot. The count is of rows, not a counter: a job that stops
  running by any path (completion, a reclaimed lease, a person's action, a worker's crash)
  frees its slot with its row.
"""

from __future__ import annotations

from .claim_rules import TURN
from .postgres_storage_sql import _LEAF_SETTINGS

KEYED_SEGMENT = 4
"""The live segment keyed jobs are written to (0-2 are the ring, 3 the long segment)."""

KEYED_TABLE = "skiplock_jobs_live_keyed"

MIGRATION_WEIGHTS = """
-- Weighted turns (key_weight=, fair=False: 0): how many jobs a key takes each turn; the keyed
-- claim's function is made again to read it. Nullable without a default: no row rewritten.
ALTER TABLE {s}.skiplock_jobs ADD COLUMN key_weight integer CHECK (key_weight >= 0);
"""

MIGRATION_KEYS = (
    """
-- Concurrency keys (postgres_keys_sql.py, docs/design.md "Concurrency keys"). The columns are
-- nullable without a default: adding them rewrites no row.
ALTER TABLE {s}.skiplock_jobs ADD COLUMN concurrency_key text;
ALTER TABLE {s}.skiplock_jobs ADD COLUMN key_limit integer CHECK (key_limit >= 1);
-- An ordered key (ordering_key=): its jobs one at a time in id order; 'block': a dead one
-- holds the key until a person retries or discards it, 'skip': the next one runs.
ALTER TABLE {s}.skiplock_jobs ADD COLUMN key_order text CHECK (key_order IN ('block', 'skip'));
CREATE TABLE {s}."""
    + KEYED_TABLE
    + """ PARTITION OF {s}.skiplock_jobs_live
    (PRIMARY KEY (id)) FOR VALUES IN ("""
    + str(KEYED_SEGMENT)
    + """)
    """
    + _LEAF_SETTINGS
    + """;
-- The claim's walk: the keys with pending jobs, each key's jobs in claim order.
CREATE INDEX """
    + KEYED_TABLE
    + """_walk_idx ON {s}."""
    + KEYED_TABLE
    + """
    (queue, concurrency_key, priority DESC, run_at, id) WHERE state = 'pending';
-- A key's running jobs, counted by every claim of it.
CREATE INDEX """
    + KEYED_TABLE
    + """_running_idx ON {s}."""
    + KEYED_TABLE
    + """
    (concurrency_key) WHERE state = 'running';
-- An ordered key's head: its live job of the lowest id.
CREATE INDEX """
    + KEYED_TABLE
    + """_head_idx ON {s}."""
    + KEYED_TABLE
    + """
    (concurrency_key, id) WHERE state IN ('pending', 'running');
-- The dead jobs that hold their ordered keys.
CREATE INDEX skiplock_jobs_dead_blocking_idx ON {s}.skiplock_jobs_dead (concurrency_key, id)
    WHERE key_order = 'block';
-- Keyed jobs in the keyed segment and nowhere else: the ordinary claims never read it.
ALTER TABLE {s}.skiplock_jobs_live ADD CONSTRAINT skiplock_jobs_keyed_segment
    CHECK ((concurrency_key IS NULL) = (segment <> """
    + str(KEYED_SEGMENT)
    + """));
-- An ordered job has a key, and runs alone (checked where jobs are written: the live rows).
ALTER TABLE {s}.skiplock_jobs_live ADD CONSTRAINT skiplock_jobs_key_order
    CHECK (key_order IS NULL OR (concurrency_key IS NOT NULL AND key_limit = 1));
-- The keyed claim's walk: the first n (queue, key) pairs with pending keyed jobs after the
-- cursor (after_q, after_k; NULL: from the first), in the queues named (NULL: any), then from
-- the first pair again up to the cursor: one probe of the walk index a pair (a loose index
-- scan), one a served queue when some are named (another queue's keys are never read). Its
-- probes name the keyed segment's table (through the partitioned table the row comparison
-- is not an index condition: a probe read the queue's whole backlog and sorted it, 46 ms of
-- 100,000 rows), and its settings keep them on the walk index whatever the statistics say
-- (planned from a segment loaded since its last ANALYZE, a bitmap of the backlog: 1.6 s a
-- claim, measured).
CREATE FUNCTION {s}.skiplock_key_walk(after_q text, after_k text, queues text[], n integer)
RETURNS TABLE (q text, k text, pos integer)
LANGUAGE plpgsql STABLE SET enable_bitmapscan = off SET enable_seqscan = off AS $$
DECLARE
    cq text := coalesce(after_q, '');
    ck text := coalesce(after_k, '');
    lap integer := 0;
    nq text;
    nk text;
BEGIN
    pos := 0;
    WHILE pos < n LOOP
        nq := NULL;
        nk := NULL;
        IF queues IS NULL THEN
            SELECT j.queue, j.concurrency_key INTO nq, nk FROM {s}."""
    + KEYED_TABLE
    + """ j
            WHERE j.state = 'pending' AND (j.queue, j.concurrency_key) > (cq, ck)
            ORDER BY j.queue, j.concurrency_key LIMIT 1;
        ELSE
            SELECT x.name, x.key INTO nq, nk FROM (
                SELECT u.name, (SELECT min(j.concurrency_key) FROM {s}."""
    + KEYED_TABLE
    + """ j
                                WHERE j.state = 'pending' AND j.queue = u.name
                                  AND j.concurrency_key > CASE WHEN u.name = cq THEN ck
                                                               ELSE '' END) AS key
                FROM unnest(queues) AS u(name) WHERE u.name >= cq
            ) x
            WHERE x.key IS NOT NULL ORDER BY x.name LIMIT 1;
        END IF;
        IF nq IS NULL THEN
            EXIT WHEN lap = 1 OR after_k IS NULL;
            lap := 1;  -- past the last pair: round again from the first, up to the cursor
            cq := '';
            ck := '';
            CONTINUE;
        END IF;
        EXIT WHEN lap = 1 AND (nq, nk) > (after_q, after_k);
        pos := pos + 1;
        q := nq;
        k := nk;
        RETURN NEXT;
        cq := nq;
        ck := nk;
    END LOOP;
END
$$;
-- NULL when another transaction holds the key's lock; else, under that lock (released at the
-- end of the caller's transaction), how many of the key's jobs run now, read in a snapshot
-- of this statement's own.
CREATE FUNCTION {s}.skiplock_key_running(k text) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('skiplock_key:{s}'), hashtext(k)) THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT count(*) FROM {s}.skiplock_jobs
            WHERE state = 'running' AND segment = """
    + str(KEYED_SEGMENT)
    + """ AND concurrency_key = k);
END
$$;
"""
)


def blocked(key: str, head: str) -> str:
    """A dead job of ordered key ``key`` before its head ``head`` that blocks it (until a
    person retries or discards it): a probe of the dead partition's blocking index."""
    return f"""SELECT 1 FROM {{s}}.skiplock_jobs d
                  WHERE d.state = 'dead' AND d.key_order = 'block'
                    AND d.concurrency_key = {key} AND d.id < {head}"""


def parked_ahead(key: str, head: str) -> str:
    """A job of ordered key ``key`` parked on a signal (``wait_for``) with an id below
    ``head``: it keeps its key's turn until it finishes. One probe of the waiting partition's
    ordered index, then of the parked job's wait row (a job waiting for its parents, which
    never ran, holds nothing: its parents may be later jobs of the same key)."""
    return f"""SELECT 1 FROM {{s}}.skiplock_jobs p JOIN {{s}}.skiplock_waits pw ON pw.job_id = p.id
                  WHERE p.state = 'waiting' AND p.key_order IS NOT NULL
                    AND p.concurrency_key = {key} AND p.id < {head}
                    AND pw.signal IS NOT NULL"""


def keyed_claim(claim_update: str, *, weighted: bool = True) -> str:
    """The keyed claim; ``claim_update`` is the ordinary claims' update of the ids in ``c``
    (postgres_sql._CLAIM_UPDATE). ``weighted``: a key's turn counts ``key_weight`` jobs
    (migration 16); migration 13's function, before the column, counted one."""
    # The keyed segment's table by its primary key alone: the rows are locked in ``c`` and
    # pending; a state condition lets the planner AND the ids with a whole partial index of
    # the segment (100,000 entries read for 16 rows, from statistics older than a bulk load).
    where = (
        "WHERE j.id = ANY(ARRAY(SELECT id FROM c)) AND j.state IN ('pending', 'running')\n"
        f"  AND j.segment <> {KEYED_SEGMENT}  -- the keyed claim's: = (its own segment)"
    )
    update = claim_update.replace(where, "WHERE j.id = ANY(ARRAY(SELECT id FROM c))").replace(
        "UPDATE {s}.skiplock_jobs j", "UPDATE {s}." + KEYED_TABLE + " j"
    )
    assert where in claim_update and "UPDATE {s}.skiplock_jobs j" in claim_update
    weight = ",\n           first_value(c.key_weight) OVER w AS wt" if weighted else ""
    weight_column = ", key_weight" if weighted else ""
    weight_h = ", h.key_weight" if weighted else ""
    # a key's turn is its next ``wt`` jobs (0: no turns, its jobs by age); then the walk's place
    order = f"priority DESC, {TURN}, pos, rank" if weighted else "priority DESC, rank, pos"
    return (
        f"""
-- Claim up to $2 ready keyed jobs of the queues in $1 (NULL: any) for worker $3 under token
-- $4 (leases as the ordinary claim: $5 default, $6 margin; $7 now), visiting at most $11
-- (queue, key) pairs after the cursor ($9, $10; NULL: from the first). $8: a limited queue's
-- own claim, under its settings row's lock (otherwise limited queues are left to it). Rows:
-- each job claimed with its key and the key's place in the walk, and in every row the last
-- pair visited when the walk went its whole length (NULL: it reached the end, start over);
-- one row of NULLs but those when nothing was claimed.
WITH now_ AS (SELECT coalesce($7::timestamptz, now()) AS t),
walk AS MATERIALIZED (
    -- the pairs to visit in turn (skiplock_key_walk: after the cursor, then round again)
    SELECT q, k, pos FROM {{s}}.skiplock_key_walk($9::text, $10::text, $1::text[], $11)
),
keys AS MATERIALIZED (
    -- each pair's key locked (NULL running: another claimer holds it, skip), then counted;
    -- whether it is an ordered key, as its first pending job says (one probe)
    SELECT q, k, pos, {{s}}.skiplock_key_running(k) AS running,
           (SELECT j.key_order FROM {{s}}.skiplock_jobs j
            WHERE j.state = 'pending' AND j.segment = {KEYED_SEGMENT}
              AND j.queue = walk.q AND j.concurrency_key = walk.k
            ORDER BY j.priority DESC, j.run_at, j.id LIMIT 1) AS ordered
    FROM walk
),
cand AS MATERIALIZED (
    -- each key's first $2 ready jobs (a key's limit is the one its first ready job carries);
    -- an ordered key's head alone (its live job of the lowest id) if it is pending, due and
    -- not behind a dead job of its key that blocks it
    SELECT c.id, c.priority, k.k, k.pos, k.running,
           row_number() OVER w AS rank, first_value(c.key_limit) OVER w AS lim{weight}
    FROM keys k CROSS JOIN LATERAL (
        (SELECT id, priority, run_at, key_limit{weight_column} FROM {{s}}.skiplock_jobs
        WHERE state = 'pending' AND segment = {KEYED_SEGMENT}
          AND queue = k.q AND concurrency_key = k.k AND run_at <= (SELECT t FROM now_)
          AND task NOT IN (SELECT task FROM {{s}}.skiplock_task_pauses
                           WHERE until IS NULL OR until > (SELECT t FROM now_))
          AND k.ordered IS NULL
        ORDER BY priority DESC, run_at, id
        LIMIT $2)
        UNION ALL
        SELECT h.id, h.priority, h.run_at, h.key_limit{weight_h} FROM (
            SELECT id, priority, run_at, key_limit{weight_column}, state, queue, task
            FROM {{s}}.skiplock_jobs
            WHERE state IN ('pending', 'running') AND segment = {KEYED_SEGMENT}
              AND concurrency_key = k.k AND k.ordered IS NOT NULL
            ORDER BY id LIMIT 1
        ) h
        WHERE h.state = 'pending' AND h.queue = k.q AND h.run_at <= (SELECT t FROM now_)
          AND h.task NOT IN (SELECT task FROM {{s}}.skiplock_task_pauses
                             WHERE until IS NULL OR until > (SELECT t FROM now_))
          AND NOT EXISTS ({blocked("k.k", "h.id")})
    ) c
    WHERE k.running IS NOT NULL
      -- paused queues never; limited queues only through their own locked claim ($8)
      AND k.q NOT IN (SELECT name FROM {{s}}.skiplock_queues
                      WHERE paused OR (NOT $8 AND (max_running IS NOT NULL
                                                   OR rate_per_s IS NOT NULL)))
    WINDOW w AS (PARTITION BY k.k ORDER BY c.priority DESC, c.run_at, c.id)
),
c AS MATERIALIZED (
    -- within each key's room: priority first, then the key's turn, then age; locked, and
    -- still pending as locked (the row's latest version; by primary key alone, as above)
    SELECT x.id FROM (
        SELECT j.id, j.state FROM {{s}}.{KEYED_TABLE} j
        WHERE j.id = ANY(ARRAY(
            SELECT id FROM cand WHERE lim IS NULL OR rank <= lim - running
            ORDER BY {order} LIMIT $2))
        FOR UPDATE SKIP LOCKED
    ) x
    WHERE x.state = 'pending'
),
claimed AS (
"""
        + update.rstrip()
        + """, j.concurrency_key AS key
)
SELECT r.*, (SELECT min(pos) FROM keys WHERE keys.q = r.queue AND keys.k = r.key) AS pos,
       (SELECT q FROM walk WHERE pos = $11) AS walked_queue,
       (SELECT k FROM walk WHERE pos = $11) AS walked_key
FROM (SELECT 1) AS one LEFT JOIN claimed r ON true
"""
    )


JOB_BUSIEST_KEYS = f"""
-- The $4 keys with the most running jobs, then the most ready (at $1, NULL: now), of queue
-- $2 and task $3 (NULL: any): each key's live jobs counted, the keyed segment's rows alone
-- (none of history, no unkeyed job).
SELECT concurrency_key AS key,
       count(*) FILTER (WHERE state = 'running') AS running,
       count(*) FILTER (WHERE state = 'pending'
                        AND run_at <= coalesce($1::timestamptz, now())) AS ready,
       count(*) FILTER (WHERE state = 'pending') AS pending,
       max(key_limit) AS key_limit
FROM {{s}}.skiplock_jobs
WHERE state IN ('pending', 'running') AND segment = {KEYED_SEGMENT}
  AND ($2::text IS NULL OR queue = $2) AND ($3::text IS NULL OR task = $3)
GROUP BY concurrency_key
ORDER BY running DESC, ready DESC, pending DESC, concurrency_key
LIMIT $4
"""

JOB_BLOCKED_KEYS = f"""
-- The $1 ordered keys a dead job holds (ordering_on_dead 'block'), oldest first: the dead
-- job and how many live jobs wait behind it (the dead partition's blocking index).
SELECT d.concurrency_key AS key, min(d.id) AS dead_job_id,
       (SELECT count(*) FROM {{s}}.skiplock_jobs l
        WHERE l.state IN ('pending', 'running') AND l.segment = {KEYED_SEGMENT}
          AND l.concurrency_key = d.concurrency_key) AS waiting
FROM {{s}}.skiplock_jobs d
WHERE d.state = 'dead' AND d.key_order = 'block'
GROUP BY d.concurrency_key
ORDER BY min(d.id)
LIMIT $1
"""

KEYED_READY = f"""SELECT 1 FROM {{s}}.skiplock_jobs j
    WHERE j.state = 'pending' AND j.segment = {KEYED_SEGMENT}
      AND j.run_at <= (SELECT t FROM now_)
      AND ($1::text[] IS NULL OR j.queue = ANY($1::text[]))
      AND j.queue NOT IN (SELECT name FROM {{s}}.skiplock_queues
                          WHERE paused OR max_running IS NOT NULL OR rate_per_s IS NOT NULL)
      AND j.task NOT IN (SELECT task FROM {{s}}.skiplock_task_pauses
                         WHERE until IS NULL OR until > (SELECT t FROM now_))
      AND (j.key_limit IS NULL
           OR (SELECT count(*) FROM {{s}}.skiplock_jobs r
               WHERE r.state = 'running' AND r.segment = {KEYED_SEGMENT}
                 AND r.concurrency_key = j.concurrency_key) < j.key_limit)
      -- an ordered key's head alone, and not while a dead job blocks it or an earlier
      -- one is parked on a signal
      AND (j.key_order IS NULL
           OR NOT EXISTS (SELECT 1 FROM {{s}}.skiplock_jobs e
                          WHERE e.state IN ('pending', 'running')
                            AND e.segment = {KEYED_SEGMENT}
                            AND e.concurrency_key = j.concurrency_key AND e.id < j.id)
              AND NOT EXISTS ({blocked("j.concurrency_key", "j.id")})
              AND NOT EXISTS ({parked_ahead("j.concurrency_key", "j.id")}))"""
"""A ready keyed job of a queue in $1 whose key has room (JOB_READY_EXISTS, at ``now_``):
the keyed claim's rule, read without its locks."""


_CLAIMED = """id bigint, task text, queue text, args text, kwargs text, priority integer,
    attempt integer, max_attempts integer, timeout double precision, lease_token text,
    created_at timestamptz, lease_expires_at timestamptz, lease_s double precision,
    correlation_id text, trace_context text, payload_version integer, segment smallint,
    key text, pos integer, walked_queue text, walked_key text"""
"""The keyed claim's rows: a claimed job's columns (the ordinary claims' RETURNING), its key,
the key's place in the walk, and where the walk ended."""


def claim_function(claim_update: str, *, weighted: bool = True, replace: bool = False) -> str:
    """Migration 13's ``skiplock_keyed_claim``: the keyed claim (``keyed_claim``) as a function
    whose plan is prepared once per session, generic. Planned each time, as a statement, it
    cost 1.3 ms of planning for 0.7 ms of work: 2.8 ms a claim of 2 against 0.9 ms (100 keys,
    30,000 jobs). Its column names are its result's, hence ``use_column``."""
    return (
        """
-- The keyed claim (postgres_keys_sql.keyed_claim), its arguments in JOB_GET_AVAILABLE_KEYED's
-- order; its plan made once per session.
CREATE """
        + ("OR REPLACE " if replace else "")
        + """FUNCTION {s}.skiplock_keyed_claim(text[], integer, text, text, double precision,
    double precision, timestamptz, boolean, text, text, integer)
RETURNS TABLE ("""
        + _CLAIMED
        + """)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY"""
        + keyed_claim(claim_update, weighted=weighted).rstrip()
        + """;
END
$$;
"""
    )
