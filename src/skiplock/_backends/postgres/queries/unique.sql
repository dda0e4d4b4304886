-- name: JOB_HOLDER_OF
-- The job holding unique key $1 in key space $3 at $2 (the database's now() when NULL), if
-- any.
SELECT k.job_id FROM {s}.skiplock_keys k
WHERE k.unique_key = $1 AND k.unique_scope = $3 AND (k.held_until IS NULL OR k.held_until > coalesce($2::timestamptz, now()))

-- name: JOB_REPLACE_PENDING
-- on_conflict="replace": the pending job of task $11 holding key $2 in key space $10 takes
-- this enqueue's arguments, run time and payload version (run at $5 or $6 seconds after $7,
-- the database's now() if NULL); the job is $1, or (NULL) the key's holder read here;
-- nothing when it is not pending (it started or finished meanwhile, or no job holds the
-- key) or is another task's (the shared key space: its function must not run with these
-- arguments). A run time moved earlier wakes its queue.
WITH r AS (
    UPDATE {s}.skiplock_jobs
    SET args = $3::jsonb, kwargs = $4::jsonb, payload_version = $8::int,
        run_at = coalesce(to_timestamp($5::float8), coalesce($7::timestamptz, now())
                          + make_interval(secs => coalesce($6::float8, 0)))
    WHERE id = coalesce($1::bigint, (SELECT k.job_id FROM {s}.skiplock_keys k
                                     WHERE k.unique_key = $2 AND k.unique_scope = $10 AND (k.held_until IS NULL OR k.held_until > coalesce($7::timestamptz, now()))))
      AND state = 'pending' AND unique_key = $2 AND task = $11
      AND coalesce(skiplock_jobs.unique_scope, skiplock_jobs.task) = $10
    RETURNING id, queue
), woken AS (
    SELECT pg_notify($9, queue) FROM r
)
SELECT id FROM r WHERE (SELECT count(*) FROM woken) >= 0

-- name: JOB_RELEASE_RUNNING_KEY
-- A debounce of task $4 gathering enqueues while its job $1 runs with key $2 in key space
-- $3 (or is parked on a signal, part way through its run): the job gives the key up (its
-- unique_key cleared: it read older arguments), so the enqueue writes a new job. Another
-- task's running or parked job keeps its key.
WITH r AS (
    UPDATE {s}.skiplock_jobs SET unique_key = NULL, unique_scope = NULL
    WHERE id = $1 AND unique_key = $2 AND task = $4
      AND (state = 'running'
           OR (state = 'waiting' AND EXISTS (SELECT 1 FROM {s}.skiplock_waits w
                                             WHERE w.job_id = $1 AND w.signal IS NOT NULL)))
      AND coalesce(skiplock_jobs.unique_scope, skiplock_jobs.task) = $3
    RETURNING id
)
DELETE FROM {s}.skiplock_keys k USING r WHERE k.unique_key = $2 AND k.job_id = r.id
RETURNING k.job_id
