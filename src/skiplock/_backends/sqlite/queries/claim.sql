-- name: JOB_GET_AVAILABLE
-- Claim up to :limit ready jobs of any queue: running, attempt + 1, leased to :worker under
-- :token; of lane :lane alone.
UPDATE skiplock_jobs_live
SET state = 'running', attempt = attempt + 1, attempted_at = :now, started_at = NULL,
    ready_at = max(run_at, created_at),
    locked_by = :worker, lease_token = :token,
    lease_expires_at = :now + coalesce(lease_s, coalesce(timeout, :default_lease) + :margin)
WHERE id IN (
    SELECT id FROM skiplock_jobs_live
    WHERE lane = :lane AND state = 'pending' AND (concurrency_key IS NOT NULL) = 0
      AND run_at <= :now
      -- paused queues never; limited and aging queues only through their own claim (:limited)
      AND queue NOT IN (SELECT name FROM skiplock_queues
                        WHERE paused OR (NOT :limited AND (max_running IS NOT NULL
                                                          OR rate_per_s IS NOT NULL
                                                          OR aging_s IS NOT NULL)))
      AND task NOT IN (SELECT task FROM skiplock_task_pauses
                       WHERE until IS NULL OR until > :now)
    ORDER BY priority DESC, run_at, id
    LIMIT :limit
) AND lane = :lane

RETURNING id, task, queue, args, kwargs, priority, attempt, max_attempts, timeout,
          lease_token, created_at, lease_expires_at,
          coalesce(lease_s, coalesce(timeout, :default_lease) + :margin) AS lease_s,
          correlation_id, trace_context, coalesce(payload_version, 1) AS payload_version,
          NULL AS segment, run_at, lane

-- name: JOB_CLAIM_IDS
-- Claim the pending jobs of ids :ids (a JSON array; the keyed claim's pick, sqlite/keys.py,
-- in the same write transaction), of lane :lane.
UPDATE skiplock_jobs_live
SET state = 'running', attempt = attempt + 1, attempted_at = :now, started_at = NULL,
    ready_at = max(run_at, created_at),
    locked_by = :worker, lease_token = :token,
    lease_expires_at = :now + coalesce(lease_s, coalesce(timeout, :default_lease) + :margin)
WHERE id IN (SELECT value FROM json_each(:ids)) AND lane = :lane AND state = 'pending'

RETURNING id, task, queue, args, kwargs, priority, attempt, max_attempts, timeout,
          lease_token, created_at, lease_expires_at,
          coalesce(lease_s, coalesce(timeout, :default_lease) + :margin) AS lease_s,
          correlation_id, trace_context, coalesce(payload_version, 1) AS payload_version,
          NULL AS segment, run_at, lane

-- name: JOB_READY_EXISTS
-- Whether the ordinary claim has a ready job to take at :now in the queues of the JSON
-- array :queues (NULL: any; :limited is false). SQLite's claim never passes one over (it
-- holds the file's write lock: no row is held from it); a burst worker asks this before it
-- ends, as on PostgreSQL, where a claim skips rows another session holds. Of lane :lane.
SELECT EXISTS (
    SELECT 1 FROM skiplock_jobs_live
    WHERE lane = :lane AND state = 'pending' AND (concurrency_key IS NOT NULL) = 0
      AND run_at <= :now
      -- paused queues never; limited and aging queues only through their own claim (:limited)
      AND queue NOT IN (SELECT name FROM skiplock_queues
                        WHERE paused OR (NOT :limited AND (max_running IS NOT NULL
                                                          OR rate_per_s IS NOT NULL)))
      AND task NOT IN (SELECT task FROM skiplock_task_pauses
                       WHERE until IS NULL OR until > :now)
      AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
) OR EXISTS (
    -- or a ready keyed job whose key has room (the keyed claim's rule)
    SELECT 1 FROM skiplock_jobs_live j
    WHERE j.lane = :lane AND j.state = 'pending' AND j.concurrency_key IS NOT NULL AND j.run_at <= :now
      AND (:queues IS NULL OR j.queue IN (SELECT value FROM json_each(:queues)))
      AND j.queue NOT IN (SELECT name FROM skiplock_queues
                          WHERE paused OR max_running IS NOT NULL OR rate_per_s IS NOT NULL)
      AND j.task NOT IN (SELECT task FROM skiplock_task_pauses
                         WHERE until IS NULL OR until > :now)
      AND (j.key_limit IS NULL
           OR (SELECT count(*) FROM skiplock_jobs_live r
               WHERE r.lane = :lane AND r.state = 'running' AND r.concurrency_key = j.concurrency_key)
              < j.key_limit)
      -- an ordered key's head alone, and not while a dead job blocks it or an earlier
      -- one is parked on a signal
      AND (j.key_order IS NULL
           OR NOT EXISTS (SELECT 1 FROM skiplock_jobs_live e
                          WHERE e.lane = :lane AND e.state IN ('pending', 'running')
                            AND e.concurrency_key IS NOT NULL
                            AND e.concurrency_key = j.concurrency_key AND e.id < j.id)
              AND NOT EXISTS (SELECT 1 FROM skiplock_jobs_live d
                              WHERE d.lane = :lane AND d.state = 'dead' AND d.key_order = 'block'
                                AND d.concurrency_key = j.concurrency_key AND d.id < j.id)
              AND NOT EXISTS (SELECT 1 FROM skiplock_jobs_live p JOIN skiplock_waits pw ON pw.job_id = p.id
        WHERE p.lane = :lane AND p.state = 'waiting' AND p.key_order IS NOT NULL AND p.concurrency_key = j.concurrency_key
          AND p.id < j.id AND pw.signal IS NOT NULL))
)

-- name: JOB_NEXT_RUN_AT
-- Seconds from :now until the earliest pending job due after :since (the start of the claim
-- that came up short), NULL if none: an idle worker sleeps until then rather than a whole
-- poll interval, and a job that came due between that claim and this read answers <= 0
-- (claim again at once) instead of being missed. The pending index leads with priority, so a
-- min over run_at would read every pending row: walk its distinct priorities instead (a loose
-- index scan, at most :most of them) and probe each one's first run_at after the claim.
-- The index leads with the lane (:lane), then whether a job is keyed: the walk is made for
-- each of the two.
WITH RECURSIVE p(keyed, priority, n) AS (
    SELECT f.keyed, (SELECT max(priority) FROM skiplock_jobs_live
                     WHERE lane = :lane AND state = 'pending' AND (concurrency_key IS NOT NULL) = f.keyed), 1
    FROM (SELECT 0 AS keyed UNION ALL SELECT 1) f
    UNION ALL
    SELECT p.keyed, (SELECT max(j.priority) FROM skiplock_jobs_live j
                     WHERE j.lane = :lane AND j.state = 'pending'
                       AND (j.concurrency_key IS NOT NULL) = p.keyed
                       AND j.priority < p.priority), p.n + 1
    FROM p WHERE p.priority IS NOT NULL AND p.n < :most
)
SELECT min((
    SELECT j.run_at FROM skiplock_jobs_live j
    WHERE j.lane = :lane AND j.state = 'pending' AND (j.concurrency_key IS NOT NULL) = p.keyed
      AND j.priority = p.priority AND j.run_at > :since
    ORDER BY j.run_at LIMIT 1)) - :now
FROM p WHERE p.priority IS NOT NULL

-- name: JOB_GET_AVAILABLE_AGED
-- Claim up to :limit ready jobs of queue :q0 by effective priority, priority +
-- floor(wait / :aging), wait = :now - run_at, then run_at, id (:levels:
-- claim_rules.AGING_LEVELS), of lane :lane; the write transaction serialises claimers.
WITH RECURSIVE hi(priority, n) AS (
    SELECT max(priority), 1 FROM skiplock_jobs_live
    WHERE lane = :lane AND queue = :q0 AND (concurrency_key IS NOT NULL) = 0
      AND state = 'pending'
    UNION ALL
    SELECT (SELECT max(j.priority) FROM skiplock_jobs_live j
            WHERE j.lane = :lane AND j.queue = :q0 AND (j.concurrency_key IS NOT NULL) = 0 AND j.state = 'pending'
              AND j.priority < hi.priority), hi.n + 1
    FROM hi WHERE hi.priority IS NOT NULL AND hi.n < :levels
),
lo(priority, n) AS (
    SELECT min(priority), 1 FROM skiplock_jobs_live
    WHERE lane = :lane AND queue = :q0 AND (concurrency_key IS NOT NULL) = 0
      AND state = 'pending'
    UNION ALL
    SELECT (SELECT min(j.priority) FROM skiplock_jobs_live j
            WHERE j.lane = :lane AND j.queue = :q0 AND (j.concurrency_key IS NOT NULL) = 0 AND j.state = 'pending'
              AND j.priority > lo.priority), lo.n + 1
    FROM lo WHERE lo.priority IS NOT NULL AND lo.n < :levels
),
levels(priority) AS (
    SELECT priority FROM hi WHERE priority IS NOT NULL
    UNION SELECT priority FROM lo WHERE priority IS NOT NULL
),
ranked AS (
    SELECT j.id, j.run_at,
           j.priority + CAST((:now - j.run_at) / :aging AS INTEGER) AS effective
    FROM levels l JOIN skiplock_jobs_live j ON j.id IN (
        -- one priority's oldest ready jobs: its slice of the per-queue pending index
        SELECT id FROM skiplock_jobs_live
        WHERE lane = :lane AND queue = :q0 AND (concurrency_key IS NOT NULL) = 0
          AND state = 'pending' AND priority = l.priority AND run_at <= :now
          AND task NOT IN (SELECT task FROM skiplock_task_pauses
                           WHERE until IS NULL OR until > :now)
        ORDER BY run_at, id
        LIMIT :limit)
)
UPDATE skiplock_jobs_live
SET state = 'running', attempt = attempt + 1, attempted_at = :now, started_at = NULL,
    ready_at = max(run_at, created_at),
    locked_by = :worker, lease_token = :token,
    lease_expires_at = :now + coalesce(lease_s, coalesce(timeout, :default_lease) + :margin)
WHERE id IN (SELECT id FROM ranked ORDER BY effective DESC, run_at, id LIMIT :limit)
  AND lane = :lane

RETURNING id, task, queue, args, kwargs, priority, attempt, max_attempts, timeout,
          lease_token, created_at, lease_expires_at,
          coalesce(lease_s, coalesce(timeout, :default_lease) + :margin) AS lease_s,
          correlation_id, trace_context, coalesce(payload_version, 1) AS payload_version,
          NULL AS segment, run_at, lane

-- name: JOB_GET_AVAILABLE_IN_QUEUES
-- Claim up to :limit ready jobs of the named queues (see job_get_available_in_queues), of
-- lane :lane.
UPDATE skiplock_jobs_live
SET state = 'running', attempt = attempt + 1, attempted_at = :now, started_at = NULL,
    ready_at = max(run_at, created_at),
    locked_by = :worker, lease_token = :token,
    lease_expires_at = :now + coalesce(lease_s, coalesce(timeout, :default_lease) + :margin)
WHERE id IN (
    SELECT id FROM (
    {branches}
    )
    ORDER BY priority DESC, run_at, id
    LIMIT :limit
) AND lane = :lane

RETURNING id, task, queue, args, kwargs, priority, attempt, max_attempts, timeout,
          lease_token, created_at, lease_expires_at,
          coalesce(lease_s, coalesce(timeout, :default_lease) + :margin) AS lease_s,
          correlation_id, trace_context, coalesce(payload_version, 1) AS payload_version,
          NULL AS segment, run_at, lane
