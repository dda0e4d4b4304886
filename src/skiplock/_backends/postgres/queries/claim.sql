-- name: JOB_GET_AVAILABLE
-- Atomically claim up to $2 ready jobs: running, attempt + 1, leased to $3 under token $4.
-- $9: the lane, named by equality in every read of a job table (its slice of each index).
-- MATERIALIZED fences the subquery so the planner cannot re-run it and lock extra rows.
WITH now_ AS (SELECT coalesce($7::timestamptz, now()) AS t),
c AS MATERIALIZED (
    SELECT id FROM {s}.skiplock_jobs
    WHERE lane = $9 AND state = 'pending' AND run_at <= (SELECT t FROM now_)
      -- keyed jobs never: their own claim (postgres/keys.py) keeps their keys' limits.
      -- The segments part: segment <> 4 (every live segment but the keyed one), or, where a
      -- worker names them, segment IN (the live segments a new query reads): storage/sight.py
      AND {segments}
      AND ($1::text[] IS NULL OR queue = ANY($1::text[]))
      -- paused queues never; limited and aging queues only through their own locked claim
      AND queue NOT IN (SELECT name FROM {s}.skiplock_queues
                        WHERE paused OR (NOT $8 AND (max_running IS NOT NULL
                                                     OR rate_per_s IS NOT NULL OR aging_s IS NOT NULL)))
      AND task NOT IN (SELECT task FROM {s}.skiplock_task_pauses
                       WHERE until IS NULL OR until > (SELECT t FROM now_))
    ORDER BY priority DESC, run_at, id
    LIMIT $2
    -- SKIP LOCKED never waits on a row, so a claim cannot deadlock whatever its lock order
    FOR UPDATE SKIP LOCKED
)
UPDATE {s}.skiplock_jobs j
SET state = 'running', attempt = j.attempt + 1, attempted_at = (SELECT t FROM now_),
    ready_at = greatest(j.run_at, j.created_at),
    started_at = NULL, locked_by = $3, lease_token = $4,
    lease_expires_at = (SELECT t FROM now_)
                       + make_interval(secs => coalesce(j.lease_s, coalesce(j.timeout, $5) + $6))
-- id = ANY(ARRAY(...)) keeps the update on the primary key: joining the CTE instead lets the
-- planner hash a scan of the whole table once batches grow past ~50 rows.
-- state IN (...): the live partition alone, and no partial index's predicate (with
-- state = 'pending' the planner may walk a whole pending index for the ids)
WHERE j.id = ANY(ARRAY(SELECT id FROM c)) AND j.lane = $9 AND j.state IN ('pending', 'running')
  AND {segments}  -- (j's: the keyed claim's is = 4, its own segment)
RETURNING j.id, j.task, j.queue, j.args::text AS args, j.kwargs::text AS kwargs, j.priority,
          j.attempt, j.max_attempts, j.timeout, j.lease_token, j.created_at, j.lease_expires_at,
          coalesce(j.lease_s, coalesce(j.timeout, $5) + $6) AS lease_s, j.correlation_id,
          j.trace_context, coalesce(j.payload_version, 1) AS payload_version, j.segment, j.run_at,
          j.lane

-- name: JOB_GET_AVAILABLE_IN_QUEUES
-- JOB_GET_AVAILABLE for the queues in $1 only: each queue's first $2 ready jobs in claim order
-- (an ordered walk of the per-queue pending index that stops at $2, so a flood of one queue
-- costs its claims nothing even when the statistics predate it), merged, first $2 taken; of
-- lane $9 alone.
WITH now_ AS (SELECT coalesce($7::timestamptz, now()) AS t),
c AS MATERIALIZED (
    SELECT p.id FROM unnest($1::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM {s}.skiplock_jobs
        WHERE lane = $9 AND queue = q.name AND state = 'pending' AND run_at <= (SELECT t FROM now_)
          AND {segments}  -- keyed jobs never (their own claim); as JOB_GET_AVAILABLE
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
UPDATE {s}.skiplock_jobs j
SET state = 'running', attempt = j.attempt + 1, attempted_at = (SELECT t FROM now_),
    ready_at = greatest(j.run_at, j.created_at),
    started_at = NULL, locked_by = $3, lease_token = $4,
    lease_expires_at = (SELECT t FROM now_)
                       + make_interval(secs => coalesce(j.lease_s, coalesce(j.timeout, $5) + $6))
-- id = ANY(ARRAY(...)) keeps the update on the primary key: joining the CTE instead lets the
-- planner hash a scan of the whole table once batches grow past ~50 rows.
-- state IN (...): the live partition alone, and no partial index's predicate (with
-- state = 'pending' the planner may walk a whole pending index for the ids)
WHERE j.id = ANY(ARRAY(SELECT id FROM c)) AND j.lane = $9 AND j.state IN ('pending', 'running')
  AND {segments}  -- (j's: the keyed claim's is = 4, its own segment)
RETURNING j.id, j.task, j.queue, j.args::text AS args, j.kwargs::text AS kwargs, j.priority,
          j.attempt, j.max_attempts, j.timeout, j.lease_token, j.created_at, j.lease_expires_at,
          coalesce(j.lease_s, coalesce(j.timeout, $5) + $6) AS lease_s, j.correlation_id,
          j.trace_context, coalesce(j.payload_version, 1) AS payload_version, j.segment, j.run_at,
          j.lane

-- name: CLAIM_WITH_POINTER
-- The claim part: JOB_GET_AVAILABLE or JOB_GET_AVAILABLE_IN_QUEUES naming its live segments
-- (storage/sight.py), and with its rows the generation new jobs go to now (the pointer), even
-- when it claims none (a row of NULLs then): a pointer outside the segments it named tells
-- the worker to read them again (a generation made since holds jobs it could not see).
WITH claimed AS (
{claim}
)
SELECT claimed.*, p.pointer
FROM (SELECT pg_sequence_last_value('{s}.skiplock_live_segment'::regclass)::integer AS pointer) p
LEFT JOIN claimed ON true

-- name: JOB_GET_AVAILABLE_KEYED
-- The keyed claim (its walk: migration 22's function body), in its function: up to $2 ready
-- keyed jobs of the queues in $1 for worker $3 under token $4, leased as the ordinary claim
-- ($5, $6; $7 now), $8 a limited queue's own claim, visiting at most $11 keys after ($9,
-- $10); in the claim's order. A worker runs it every claim round that left room, keys or
-- none: with no pending keyed job the uncorrelated EXISTS (a one-time filter, one probe of
-- the keyed segment's pending rows) skips the function altogether, no rows (the walk starts
-- from the first next time): 80 us a round where the function took 330 (issue 44). Of lane
-- $12 alone (migration 28's function).
SELECT * FROM {s}.skiplock_keyed_claim($1::text[], $2::integer, $3::text, $4::text,
    $5::float8, $6::float8, $7::timestamptz, $8::boolean, $9::text, $10::text, $11::integer, $12::text)
WHERE EXISTS (SELECT 1 FROM {s}.skiplock_jobs_live_keyed WHERE lane = $12 AND state = 'pending')
ORDER BY place

-- name: JOB_GET_AVAILABLE_AGED
-- Claim up to $2 ready jobs of queue $1 by effective priority, priority + floor(wait / $8),
-- wait = now - run_at, then run_at, id; for worker $3 under token $4, leased as the other
-- claims ($5, $6; $7 now). Candidates: the first $2 ready jobs of each of the queue's $9
-- highest and $9 lowest pending priorities (claim_rules.AGING_LEVELS); of lane $10 alone.
WITH RECURSIVE now_ AS (SELECT coalesce($7::timestamptz, now()) AS t),
hi(priority, n) AS (
    SELECT max(priority), 1 FROM {s}.skiplock_jobs
    WHERE lane = $10 AND queue = $1 AND state = 'pending' AND segment <> 4
    UNION ALL
    SELECT (SELECT max(j.priority) FROM {s}.skiplock_jobs j
            WHERE j.lane = $10 AND j.queue = $1 AND j.state = 'pending' AND j.segment <> 4
              AND j.priority < hi.priority), hi.n + 1
    FROM hi WHERE hi.priority IS NOT NULL AND hi.n < $9
),
lo(priority, n) AS (
    SELECT min(priority), 1 FROM {s}.skiplock_jobs
    WHERE lane = $10 AND queue = $1 AND state = 'pending' AND segment <> 4
    UNION ALL
    SELECT (SELECT min(j.priority) FROM {s}.skiplock_jobs j
            WHERE j.lane = $10 AND j.queue = $1 AND j.state = 'pending' AND j.segment <> 4
              AND j.priority > lo.priority), lo.n + 1
    FROM lo WHERE lo.priority IS NOT NULL AND lo.n < $9
),
levels AS (
    SELECT priority FROM hi WHERE priority IS NOT NULL
    UNION SELECT priority FROM lo WHERE priority IS NOT NULL
),
ranked AS (
    SELECT p.id, p.run_at,
           p.priority + floor(extract(epoch FROM (SELECT t FROM now_) - p.run_at)::float8
                              / $8::float8) AS effective
    FROM levels l CROSS JOIN LATERAL (
        -- one priority's oldest ready jobs: its slice of the per-queue pending index
        SELECT id, priority, run_at FROM {s}.skiplock_jobs
        WHERE lane = $10 AND queue = $1 AND state = 'pending' AND priority = l.priority
          AND run_at <= (SELECT t FROM now_) AND segment <> 4
          AND task NOT IN (SELECT task FROM {s}.skiplock_task_pauses
                           WHERE until IS NULL OR until > (SELECT t FROM now_))
        ORDER BY run_at, id
        LIMIT $2
    ) AS p
),
c AS MATERIALIZED (
    -- the best $2, locked; SKIP LOCKED passes over a row another session holds this instant
    -- (a rotation moving it): the queue's own claimers wait on its settings row instead
    SELECT id FROM {s}.skiplock_jobs
    WHERE id = ANY(ARRAY(SELECT id FROM ranked ORDER BY effective DESC, run_at, id LIMIT $2))
      -- (state IN: the live partition alone, no partial index; lease_token IS NULL: still
      -- pending when locked, re-checked on a row changed since the statement's snapshot)
      AND lane = $10 AND state IN ('pending', 'running') AND lease_token IS NULL AND segment <> 4
    FOR UPDATE SKIP LOCKED
)
UPDATE {s}.skiplock_jobs j
SET state = 'running', attempt = j.attempt + 1, attempted_at = (SELECT t FROM now_),
    ready_at = greatest(j.run_at, j.created_at),
    started_at = NULL, locked_by = $3, lease_token = $4,
    lease_expires_at = (SELECT t FROM now_)
                       + make_interval(secs => coalesce(j.lease_s, coalesce(j.timeout, $5) + $6))
-- id = ANY(ARRAY(...)) keeps the update on the primary key: joining the CTE instead lets the
-- planner hash a scan of the whole table once batches grow past ~50 rows.
-- state IN (...): the live partition alone, and no partial index's predicate (with
-- state = 'pending' the planner may walk a whole pending index for the ids)
WHERE j.id = ANY(ARRAY(SELECT id FROM c)) AND j.lane = $10 AND j.state IN ('pending', 'running')
  AND j.segment <> 4  -- the keyed claim's: = (its own segment)
RETURNING j.id, j.task, j.queue, j.args::text AS args, j.kwargs::text AS kwargs, j.priority,
          j.attempt, j.max_attempts, j.timeout, j.lease_token, j.created_at, j.lease_expires_at,
          coalesce(j.lease_s, coalesce(j.timeout, $5) + $6) AS lease_s, j.correlation_id,
          j.trace_context, coalesce(j.payload_version, 1) AS payload_version, j.segment, j.run_at,
          j.lane

-- name: JOB_READY_EXISTS
-- Whether the ordinary claim of the queues in $1 (NULL: any) has a ready job to take at $2
-- (NULL: the database's now), locked or not: a claim's SKIP LOCKED passes over rows another
-- session holds for a moment (a rotation moving them to the long segment, an operator's
-- update), so a claim that came up short does not prove nothing is left. A burst worker asks
-- this before it ends. Or the keyed claim: a ready keyed job whose key has room. Lane $3.
WITH now_ AS (SELECT coalesce($2::timestamptz, now()) AS t)
SELECT EXISTS (
    SELECT id FROM {s}.skiplock_jobs
    WHERE lane = $3 AND state = 'pending' AND run_at <= (SELECT t FROM now_)
      -- keyed jobs never: their own claim (postgres/keys.py) keeps their keys' limits
      AND segment <> 4
      AND ($1::text[] IS NULL OR queue = ANY($1::text[]))
      -- paused queues never; limited and aging queues only through their own locked claim
      AND queue NOT IN (SELECT name FROM {s}.skiplock_queues
                        WHERE paused OR (NOT false AND (max_running IS NOT NULL
                                                     OR rate_per_s IS NOT NULL OR false)))
      AND task NOT IN (SELECT task FROM {s}.skiplock_task_pauses
                       WHERE until IS NULL OR until > (SELECT t FROM now_))
    ORDER BY priority DESC, run_at, id
) OR EXISTS (
    SELECT 1 FROM {s}.skiplock_jobs j
    WHERE j.lane = $3 AND j.state = 'pending' AND j.segment = 4
      AND j.run_at <= (SELECT t FROM now_)
      AND ($1::text[] IS NULL OR j.queue = ANY($1::text[]))
      AND j.queue NOT IN (SELECT name FROM {s}.skiplock_queues
                          WHERE paused OR max_running IS NOT NULL OR rate_per_s IS NOT NULL)
      AND j.task NOT IN (SELECT task FROM {s}.skiplock_task_pauses
                         WHERE until IS NULL OR until > (SELECT t FROM now_))
      AND (j.key_limit IS NULL
           OR (SELECT count(*) FROM {s}.skiplock_jobs r
               WHERE r.lane = $3 AND r.state = 'running' AND r.segment = 4
                 AND r.concurrency_key = j.concurrency_key) < j.key_limit)
      -- an ordered key's head alone, and not while a dead job blocks it or an earlier
      -- one is parked on a signal
      AND (j.key_order IS NULL
           OR NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs e
                          WHERE e.lane = $3 AND e.state IN ('pending', 'running')
                            AND e.segment = 4
                            AND e.concurrency_key = j.concurrency_key AND e.id < j.id)
              AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs d
                  WHERE d.lane = $3 AND d.state = 'dead' AND d.key_order = 'block'
                    AND d.concurrency_key = j.concurrency_key AND d.id < j.id)
              AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs p JOIN {s}.skiplock_waits pw ON pw.job_id = p.id
                  WHERE p.lane = $3 AND p.state = 'waiting' AND p.key_order IS NOT NULL
                    AND p.concurrency_key = j.concurrency_key AND p.id < j.id
                    AND pw.signal IS NOT NULL))
)

-- name: JOB_NEXT_RUN_AT
-- Seconds from now ($1, NULL: the database's) until the earliest pending job due after
-- now - $3 seconds (the start of the claim that came up short), NULL if none: an idle worker
-- sleeps until then rather than a whole poll interval, and a job that came due between that
-- claim and this read answers <= 0 (claim again at once) instead of being missed. The
-- pending index leads with priority, so a min over run_at would read every pending row: walk
-- its distinct priorities instead (a loose index scan, at most $2 of them) and take each
-- priority's first run_at after the claim, a probe of the same index. Of lane $4 alone.
WITH RECURSIVE now_ AS (
    SELECT t, t - make_interval(secs => $3::float8) AS since
    FROM (SELECT coalesce($1::timestamptz, now()) AS t) n
),
p(priority, n) AS (
    SELECT max(priority), 1 FROM {s}.skiplock_jobs WHERE lane = $4 AND state = 'pending'
    UNION ALL
    SELECT (SELECT max(j.priority) FROM {s}.skiplock_jobs j
            WHERE j.lane = $4 AND j.state = 'pending' AND j.priority < p.priority), p.n + 1
    FROM p WHERE p.priority IS NOT NULL AND p.n < $2
)
SELECT extract(epoch FROM min((
    SELECT j.run_at FROM {s}.skiplock_jobs j
    WHERE j.lane = $4 AND j.state = 'pending' AND j.priority = p.priority
      AND j.run_at > (SELECT since FROM now_)
    ORDER BY j.run_at LIMIT 1)) - (SELECT t FROM now_))::float8
FROM p WHERE p.priority IS NOT NULL
