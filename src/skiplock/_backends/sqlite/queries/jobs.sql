-- name: JOB_GET
-- One job row, for inspection.
SELECT id, task, queue, state, args, kwargs, priority, attempt, max_attempts, run_at,
       created_at, attempted_at, finished_at, locked_by, lease_expires_at, errors,
       correlation_id, audit, started_at, result, progress, payload_version, unique_key,
       unique_until, concurrency_key, key_limit, key_order, key_weight, lane
FROM skiplock_jobs WHERE id = :id

-- name: JOB_OUTCOME_MANY
-- Where the waited-for jobs (:ids, a JSON array) stand: state, the result of a succeeded one,
-- the last error of a finished one. One primary-key probe per id.
SELECT id, state, CASE WHEN state = 'succeeded' THEN result END AS result,
       CASE WHEN state IN ('cancelled', 'dead') THEN json_extract(errors, '$[#-1]') END
           AS last_error
FROM skiplock_jobs WHERE id IN (SELECT value FROM json_each(:ids))

-- name: JOB_COUNT_BY_STATE
-- Jobs per state, optionally for one queue; running jobs not yet started count as claimed.
SELECT CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END,
       count(*)
FROM skiplock_jobs WHERE :queue IS NULL OR queue = :queue GROUP BY 1

-- name: JOB_COUNT_BY_QUEUE
-- Jobs per queue and state (running jobs not yet started count as claimed): the Overview's.
SELECT queue,
       CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END,
       count(*)
FROM skiplock_jobs GROUP BY 1, 2

-- name: JOB_RETRY
-- A person requeues a finished job: pending now, attempts reset, its result and progress gone
-- (so a row that is not succeeded never holds a result: completions may leave it alone).
UPDATE skiplock_jobs_live
SET state = 'pending', attempt = 0, run_at = :now, finished_at = NULL, result = NULL,
    progress = NULL,
    lease_token = NULL, lease_expires_at = NULL, cancel_requested = 0,
    -- a key of a row from before migration 18 is its task's own
    unique_scope = CASE WHEN unique_key IS NOT NULL THEN coalesce(unique_scope, task) END,
    audit = CASE WHEN json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) < 20
        THEN json_insert(audit, '$[#]', json_object('at', :now, 'who', :who, 'what', 'retry'))
        ELSE (SELECT json_group_array(json(kept.v)) FROM (
            SELECT -1 AS k, json_object(
                'at', json_extract(audit, '$[' || (json_array_length(audit) - 20) || '].at'),
                'who', 'skiplock',
                'what', printf('%d earlier actions left out', coalesce(json_extract(audit, '$[0].omitted'), 0) + (json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)),
                'omitted', coalesce(json_extract(audit, '$[0].omitted'), 0) + (json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)) AS v
            UNION ALL
            SELECT e.key, e.value FROM json_each(audit) e WHERE e.key >= json_array_length(audit) - 20 + 1
            UNION ALL
            SELECT 9223372036854775807, json_object('at', :now, 'who', :who, 'what', 'retry')
            ORDER BY k) kept) END
WHERE id = :id AND state IN ('succeeded', 'cancelled', 'dead')
  -- one that ended waiting for its parents waits for them again instead
  -- (workflow_flows.retry_unreleased): never pending without their results
  AND NOT EXISTS (SELECT 1 FROM skiplock_unreleased u WHERE u.job_id = :id)

-- name: JOB_CANCEL
-- A person cancels a job: pending or waiting -> cancelled at once; running -> flagged for its
-- worker (a waiting job's children follow their on_parent_failure at the next release); a
-- running job already flagged is left as it is (JOB_CANCEL in postgres/queries/inspect.sql).
UPDATE skiplock_jobs_live
SET state = CASE WHEN state IN ('pending', 'waiting') THEN 'cancelled' ELSE state END,
    finished_at = CASE WHEN state IN ('pending', 'waiting') THEN :now ELSE finished_at END,
    cancel_requested = 1,
    audit = CASE WHEN json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) < 20
        THEN json_insert(audit, '$[#]', json_object('at', :now, 'who', :who, 'what', 'cancel'))
        ELSE (SELECT json_group_array(json(kept.v)) FROM (
            SELECT -1 AS k, json_object(
                'at', json_extract(audit, '$[' || (json_array_length(audit) - 20) || '].at'),
                'who', 'skiplock',
                'what', printf('%d earlier actions left out', coalesce(json_extract(audit, '$[0].omitted'), 0) + (json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)),
                'omitted', coalesce(json_extract(audit, '$[0].omitted'), 0) + (json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)) AS v
            UNION ALL
            SELECT e.key, e.value FROM json_each(audit) e WHERE e.key >= json_array_length(audit) - 20 + 1
            UNION ALL
            SELECT 9223372036854775807, json_object('at', :now, 'who', :who, 'what', 'cancel')
            ORDER BY k) kept) END
WHERE id = :id AND state IN ('pending', 'running', 'waiting')
  AND NOT (state = 'running' AND cancel_requested)
RETURNING state

-- name: JOB_LIST
-- Jobs matching a filter, newest first; every condition is optional. :before pages by
-- keyset (ids below the previous page's last): a backward walk of the rowid from there,
-- never OFFSET (written as a range on id, not "IS NULL OR", so the planner seeks to it).
SELECT id, task, queue, state, args, kwargs, priority, attempt, max_attempts, run_at,
       created_at, attempted_at, finished_at, locked_by, lease_expires_at, errors,
       correlation_id, audit, started_at, result, progress, payload_version, unique_key,
       unique_until, concurrency_key, key_limit, key_order, key_weight, lane
FROM skiplock_jobs
WHERE (:state IS NULL OR state = :state)
      AND id < coalesce(:before, 9223372036854775807)
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
      AND (:last_error IS NULL OR coalesce(CASE WHEN json_valid(errors) THEN json_extract(errors, '$[#-1].message') END, '') = :last_error)
ORDER BY id DESC LIMIT :limit

-- name: JOB_LIST_OLDEST
-- Jobs matching a filter, oldest first: the ones a bulk action with the same filter and
-- limit acts on (:before pages forward here: ids above the previous page's last).
SELECT id, task, queue, state, args, kwargs, priority, attempt, max_attempts, run_at,
       created_at, attempted_at, finished_at, locked_by, lease_expires_at, errors,
       correlation_id, audit, started_at, result, progress, payload_version, unique_key,
       unique_until, concurrency_key, key_limit, key_order, key_weight, lane
FROM skiplock_jobs
WHERE (:state IS NULL OR state = :state)
      AND id > coalesce(:before, 0)
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
      AND (:last_error IS NULL OR coalesce(CASE WHEN json_valid(errors) THEN json_extract(errors, '$[#-1].message') END, '') = :last_error)
ORDER BY id LIMIT :limit

-- name: JOB_COUNT
-- How many jobs match JOB_LIST's filter (a bulk action's preview).
SELECT count(*) FROM skiplock_jobs
WHERE (:state IS NULL OR state = :state)
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
      AND (:last_error IS NULL OR coalesce(CASE WHEN json_valid(errors) THEN json_extract(errors, '$[#-1].message') END, '') = :last_error)

-- name: JOB_COUNT_STATES
-- How many jobs match JOB_LIST's filter in each state (:state NULL: every state), in one
-- pass (the Jobs page's counts).
SELECT state, count(*) AS n FROM skiplock_jobs
WHERE (:state IS NULL OR state = :state)
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
      AND (:last_error IS NULL OR coalesce(CASE WHEN json_valid(errors) THEN json_extract(errors, '$[#-1].message') END, '') = :last_error)
GROUP BY state

-- name: JOB_FIND
-- Jobs whose unique key or correlation id is exactly :text, newest first (a person's search:
-- no index serves a finished job's key or a correlation id, so this reads the table).
SELECT id, task, queue, state, args, kwargs, priority, attempt, max_attempts, run_at,
       created_at, attempted_at, finished_at, locked_by, lease_expires_at, errors,
       correlation_id, audit, started_at, result, progress, payload_version, unique_key,
       unique_until, concurrency_key, key_limit, key_order, key_weight, lane
FROM skiplock_jobs WHERE unique_key = :text OR correlation_id = :text
ORDER BY id DESC LIMIT :limit

-- name: JOB_DEAD_GROUPS
-- Dead jobs by task and last error message, the largest groups first.
SELECT task, coalesce(CASE WHEN json_valid(errors) THEN json_extract(errors, '$[#-1].message') END, '') AS error, count(*) AS n, max(id) AS last_id, max(finished_at) AS last_at
FROM skiplock_jobs_live
WHERE state = 'dead'
GROUP BY 1, 2
ORDER BY n DESC, task, error
LIMIT :limit

-- name: JOB_REQUEUE_DEAD
-- A person requeues dead jobs matching a filter: pending now, attempts reset, action recorded.
UPDATE skiplock_jobs_live
SET state = 'pending', attempt = 0, run_at = :now, finished_at = NULL,
    lease_token = NULL, lease_expires_at = NULL, cancel_requested = 0,
    audit = CASE WHEN json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) < 20
        THEN json_insert(audit, '$[#]', json_object('at', :now, 'who', :who, 'what', 'requeue'))
        ELSE (SELECT json_group_array(json(kept.v)) FROM (
            SELECT -1 AS k, json_object(
                'at', json_extract(audit, '$[' || (json_array_length(audit) - 20) || '].at'),
                'who', 'skiplock',
                'what', printf('%d earlier actions left out', coalesce(json_extract(audit, '$[0].omitted'), 0) + (json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)),
                'omitted', coalesce(json_extract(audit, '$[0].omitted'), 0) + (json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)) AS v
            UNION ALL
            SELECT e.key, e.value FROM json_each(audit) e WHERE e.key >= json_array_length(audit) - 20 + 1
            UNION ALL
            SELECT 9223372036854775807, json_object('at', :now, 'who', :who, 'what', 'requeue')
            ORDER BY k) kept) END
WHERE state = 'dead'
      -- at most the filter's limit, oldest first: the jobs JOB_LIST_OLDEST shows with the
      -- same filter, chosen in this statement (inside the write transaction)
      AND id IN (SELECT id FROM skiplock_jobs_live WHERE state = 'dead'
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
      AND (:last_error IS NULL OR coalesce(CASE WHEN json_valid(errors) THEN json_extract(errors, '$[#-1].message') END, '') = :last_error)
 ORDER BY id LIMIT :limit)
      -- one that died waiting for its parents never got them: only its own retry may
      AND NOT EXISTS (SELECT 1 FROM skiplock_unreleased u WHERE u.job_id = skiplock_jobs_live.id)
      -- a dead job whose unique key a live job now holds stays dead (requeueing it would
      -- break the key's promise); the caller reports it
      AND (unique_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM skiplock_jobs_live o
          WHERE o.unique_key = skiplock_jobs_live.unique_key
            AND o.unique_scope = skiplock_jobs_live.unique_scope
            AND (o.state IN ('pending', 'running') OR (o.state = 'waiting' AND o.parked) OR (o.state = 'succeeded' AND o.unique_succeeded))))
RETURNING id

-- name: JOB_DISCARD_DEAD
-- A person discards dead jobs matching a filter: they become cancelled, action recorded.
UPDATE skiplock_jobs_live
SET state = 'cancelled', finished_at = :now,
    audit = CASE WHEN json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) < 20
        THEN json_insert(audit, '$[#]', json_object('at', :now, 'who', :who, 'what', 'discard'))
        ELSE (SELECT json_group_array(json(kept.v)) FROM (
            SELECT -1 AS k, json_object(
                'at', json_extract(audit, '$[' || (json_array_length(audit) - 20) || '].at'),
                'who', 'skiplock',
                'what', printf('%d earlier actions left out', coalesce(json_extract(audit, '$[0].omitted'), 0) + (json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)),
                'omitted', coalesce(json_extract(audit, '$[0].omitted'), 0) + (json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)) AS v
            UNION ALL
            SELECT e.key, e.value FROM json_each(audit) e WHERE e.key >= json_array_length(audit) - 20 + 1
            UNION ALL
            SELECT 9223372036854775807, json_object('at', :now, 'who', :who, 'what', 'discard')
            ORDER BY k) kept) END
WHERE state = 'dead'
      -- at most the filter's limit, oldest first: the jobs JOB_LIST_OLDEST shows with the
      -- same filter, chosen in this statement (inside the write transaction)
      AND id IN (SELECT id FROM skiplock_jobs_live WHERE state = 'dead'
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
      AND (:last_error IS NULL OR coalesce(CASE WHEN json_valid(errors) THEN json_extract(errors, '$[#-1].message') END, '') = :last_error)
 ORDER BY id LIMIT :limit)
RETURNING id

-- name: JOB_PRUNE
-- Delete one bounded batch of finished rows past their retention.
DELETE FROM skiplock_jobs_live WHERE id IN (
    SELECT id FROM skiplock_jobs_live
    WHERE (state IN ('succeeded', 'cancelled') AND finished_at < :finished_before)
       OR (state = 'dead' AND finished_at < :dead_before)
    LIMIT :batch
)

-- name: JOB_PRUNE_PREVIEW
-- What JOB_PRUNE would delete now, by state (the same condition).
SELECT state, count(*) AS n FROM skiplock_jobs
    WHERE (state IN ('succeeded', 'cancelled') AND finished_at < :finished_before)
       OR (state = 'dead' AND finished_at < :dead_before)
GROUP BY state
