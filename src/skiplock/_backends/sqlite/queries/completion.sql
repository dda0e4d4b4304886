-- name: JOB_SET_STATE_IF_RUNNING_MANY
-- Write one outcome of a batch in place, only while the row is still running under its
-- lease token, in its lane (:lane).
UPDATE skiplock_jobs_live
SET state = :state,
    attempt = attempt + :attempt_delta,
    run_at = coalesce(:run_at, run_at),
    finished_at = :finished_at,
    lease_token = NULL,
    lease_expires_at = NULL,
    run_s = :run_s,
    parked = CASE WHEN :state = 'waiting' THEN 1 END,
    errors = CASE WHEN :error IS NULL THEN errors
                  WHEN json_array_length(errors) >= :max_errors
                  THEN json_insert(json_remove(errors, '$[0]'), '$[#]', json(:error))
                  ELSE json_insert(errors, '$[#]', json(:error)) END
WHERE id = :id AND lane = :lane AND lease_token = :token AND state = 'running'

-- name: JOB_SET_STATE_KEEPING_RESULT
-- Write one outcome of a batch in place, only while the row is still running under its
-- lease token, in its lane (:lane).
UPDATE skiplock_jobs_live
SET state = :state,
    attempt = attempt + :attempt_delta,
    run_at = coalesce(:run_at, run_at),
    finished_at = :finished_at,
    lease_token = NULL,
    lease_expires_at = NULL,
    run_s = :run_s,
    parked = CASE WHEN :state = 'waiting' THEN 1 END,
    errors = CASE WHEN :error IS NULL THEN errors
                  WHEN json_array_length(errors) >= :max_errors
                  THEN json_insert(json_remove(errors, '$[0]'), '$[#]', json(:error))
                  ELSE json_insert(errors, '$[#]', json(:error)) END,
    result = :result,
    progress = coalesce(:progress, progress)
WHERE id = :id AND lane = :lane AND lease_token = :token AND state = 'running'

-- name: JOB_DELETE_MOVED
-- The live rows a completion batch copied into a day table (:ids, a JSON array).
DELETE FROM skiplock_jobs_live WHERE id IN (SELECT value FROM json_each(:ids))

-- name: JOB_RECLAIM_EXPIRED
-- Return rows whose lease expired to pending (or dead when attempts are spent; cancelled when a
-- person asked to cancel them, whose worker is gone), noting why; of lane :lane.
UPDATE skiplock_jobs_live
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
                    'message', 'lease expired (worker ' || coalesce(locked_by, '?') || ' stopped heartbeating)',
                    'traceback', NULL))
WHERE id IN (SELECT id FROM skiplock_jobs_live
             WHERE lane = :lane AND state = 'running' AND lease_expires_at < :now LIMIT 1000)
  AND lane = :lane

RETURNING id, task, queue, state, attempt, max_attempts, correlation_id, locked_by

-- name: JOB_RECLAIM_WORKER
-- JOB_RECLAIM_EXPIRED for every lease of worker :worker (its token prefix: tokens are
-- '<worker id>:<claim>'), expired or not: its supervisor saw it exit, or another worker saw
-- it is gone, so nothing renews them; the error reads 'worker <locked_by> ' || :why.
-- A row a live worker holds has another token and is never touched (fencing unchanged).
-- Of lane :lane alone.
UPDATE skiplock_jobs_live
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
                    'message', 'worker ' || coalesce(locked_by, '?') || ' ' || :why,
                    'traceback', NULL))
WHERE id IN (SELECT id FROM skiplock_jobs_live
             WHERE lane = :lane AND state = 'running' AND lease_expires_at IS NOT NULL
               AND substr(lease_token, 1, length(:worker) + 1) = :worker || ':')
  AND lane = :lane

RETURNING id, task, queue, state, attempt, max_attempts, correlation_id, locked_by

-- name: JOB_HEARTBEAT_MANY
-- Extend one lease of a batch if the row is still running under its token; mark it started
-- if its worker says it is and it was not yet, and store its new progress record (NULL: none).
-- In the job's lane (:lane).
UPDATE skiplock_jobs_live
SET lease_expires_at = :now + coalesce(lease_s, coalesce(timeout, :default_lease) + :margin),
    started_at = CASE WHEN :started THEN coalesce(started_at, :now) ELSE started_at END,
    progress = coalesce(:progress, progress)
WHERE id = :id AND lane = :lane AND lease_token = :token AND state = 'running'

-- name: JOB_CANCEL_REQUESTED
-- Which of the jobs a worker holds a person asked to cancel.
SELECT id FROM skiplock_jobs_live
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'running' AND cancel_requested
