-- name: JOB_LIVE_BY_UNIQUE_KEY
-- The job holding :unique_key in :unique_scope (live, or succeeded where the job asked for
-- that).
SELECT id FROM skiplock_jobs_live
WHERE unique_key = :unique_key AND unique_scope = :unique_scope AND (state IN ('pending', 'running') OR (state = 'waiting' AND parked) OR (state = 'succeeded' AND unique_succeeded))

-- name: JOB_HOLDER_OF
-- The job holding :unique_key in :unique_scope (live, or succeeded where the job asked for
-- that).
SELECT id FROM skiplock_jobs_live
WHERE unique_key = :unique_key AND unique_scope = :unique_scope AND (state IN ('pending', 'running') OR (state = 'waiting' AND parked) OR (state = 'succeeded' AND unique_succeeded))

-- name: JOB_REPLACE_PENDING
-- on_conflict="replace": the pending holder, a job of the enqueue's task, takes its
-- arguments, run time and payload version (another task's job in the shared key space is
-- left as it is: its function must not run with these arguments).
UPDATE skiplock_jobs_live
SET args = :args, kwargs = :kwargs, run_at = :run_at, payload_version = :payload_version
WHERE id = :id AND state = 'pending' AND unique_key = :unique_key
  AND unique_scope = :unique_scope AND task = :task

-- name: JOB_RELEASE_RUNNING_KEY
-- A debounce while the holder, a job of its task, runs (or is parked on a signal, part way
-- through its run): it gives the key up (it read older arguments). Another task's running or
-- parked job keeps its key.
UPDATE skiplock_jobs_live SET unique_key = NULL, unique_scope = NULL
WHERE id = :id AND (state = 'running' OR (state = 'waiting' AND parked))
  AND unique_key = :unique_key
  AND unique_scope = :unique_scope AND task = :task

-- name: JOB_KEY_PASSED
-- The succeeded job keeping :unique_key in :unique_scope past its window (unique_until <=
-- :now) lets it go.
UPDATE skiplock_jobs_live SET unique_succeeded = 0
WHERE unique_key = :unique_key AND unique_scope = :unique_scope AND (state IN ('pending', 'running') OR (state = 'waiting' AND parked) OR (state = 'succeeded' AND unique_succeeded))
  AND state = 'succeeded' AND unique_until <= :now

-- name: JOB_KEYS_PASSED
-- Every succeeded job past its window lets its key go (ahead of a person's requeue, which
-- may give a dead job its key back).
UPDATE skiplock_jobs_live SET unique_succeeded = 0
WHERE state = 'succeeded' AND unique_succeeded AND unique_until <= :now
