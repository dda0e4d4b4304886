-- name: JOB_GET
-- One job row, for inspection.
SELECT id, task, queue, state, args::text AS args, kwargs::text AS kwargs, priority,
       attempt, max_attempts, extract(epoch FROM run_at) AS run_at,
       extract(epoch FROM created_at) AS created_at,
       extract(epoch FROM attempted_at) AS attempted_at,
       extract(epoch FROM finished_at) AS finished_at, locked_by,
       extract(epoch FROM lease_expires_at) AS lease_expires_at, errors::text AS errors,
       correlation_id, audit::text AS audit, extract(epoch FROM started_at) AS started_at,
       result::text AS result, progress::text AS progress, payload_version, unique_key,
       extract(epoch FROM unique_until) AS unique_until, concurrency_key, key_limit,
       key_order, key_weight, lane
FROM {s}.skiplock_jobs WHERE id = $1

-- name: JOB_OUTCOME_MANY
-- Where the waited-for jobs $1 stand: state, the result of a succeeded one, the last error of
-- a finished one. One primary-key probe per id.
SELECT id, state, CASE WHEN state = 'succeeded' THEN result::text END AS result,
       CASE WHEN state IN ('cancelled', 'dead') THEN (errors -> -1)::text END AS last_error
FROM {s}.skiplock_jobs WHERE id = ANY($1::bigint[])

-- name: JOB_COUNT_BY_STATE
-- Jobs per state, optionally for one queue; running jobs not yet started count as claimed.
SELECT CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END AS state,
       count(*) AS n
FROM {s}.skiplock_jobs
WHERE ($1::text IS NULL OR queue = $1) /*part*/ GROUP BY 1

-- name: JOB_COUNT_BY_QUEUE
-- Jobs per queue and state (running jobs not yet started count as claimed): the Overview's.
SELECT queue,
       CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END AS state,
       count(*) AS n
FROM {s}.skiplock_jobs
WHERE true /*part*/ GROUP BY 1, 2

-- name: JOB_RETRY
-- A person requeues a finished job: pending now, attempts reset, then wake the workers. A
-- key its window no longer holds goes first (the job's trigger takes it after this statement).
WITH freed AS (
    DELETE FROM {s}.skiplock_keys k
    WHERE k.held_until <= coalesce($3::timestamptz, now())
      AND (k.unique_key, k.unique_scope) = (SELECT j.unique_key, coalesce(j.unique_scope, j.task)
                                            FROM {s}.skiplock_jobs j
                                            WHERE j.id = $1 AND j.state IN ('succeeded', 'cancelled', 'dead'))
), r AS (
    UPDATE {s}.skiplock_jobs
    SET state = 'pending', attempt = 0, run_at = coalesce($3::timestamptz, now()),
        finished_at = NULL, result = NULL, progress = NULL, lease_token = NULL,
        lease_expires_at = NULL,
        cancel_requested = false,
        audit = CASE WHEN jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) < 20
        THEN audit || jsonb_build_array(jsonb_build_object('at', coalesce($3::timestamptz, now()), 'who', $4::text, 'what', 'retry'))
        ELSE jsonb_build_array(jsonb_build_object(
                'at', audit -> (jsonb_array_length(audit) - 20) -> 'at',
                'who', 'skiplock',
                'what', format('%s earlier actions left out', coalesce((audit -> 0 ->> 'omitted')::bigint, 0) + (jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)),
                'omitted', coalesce((audit -> 0 ->> 'omitted')::bigint, 0) + (jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)))
            || jsonb_path_query_array(audit, '$[$from to last]',
                                      jsonb_build_object('from', jsonb_array_length(audit) - 20 + 1))
            || jsonb_build_array(jsonb_build_object('at', coalesce($3::timestamptz, now()), 'who', $4::text, 'what', 'retry')) END
    WHERE id = $1 AND state IN ('succeeded', 'cancelled', 'dead')
      -- one that ended waiting for its parents waits for them again instead
      -- (workflow_flows.retry_unreleased): never pending without their results
      AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_unreleased u WHERE u.job_id = $1)
    RETURNING queue
)
SELECT pg_notify($2, queue) FROM r

-- name: JOB_CANCEL
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
    audit = CASE WHEN jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) < 20
        THEN audit || jsonb_build_array(jsonb_build_object('at', (SELECT t FROM now_), 'who', $2::text, 'what', 'cancel'))
        ELSE jsonb_build_array(jsonb_build_object(
                'at', audit -> (jsonb_array_length(audit) - 20) -> 'at',
                'who', 'skiplock',
                'what', format('%s earlier actions left out', coalesce((audit -> 0 ->> 'omitted')::bigint, 0) + (jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)),
                'omitted', coalesce((audit -> 0 ->> 'omitted')::bigint, 0) + (jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)))
            || jsonb_path_query_array(audit, '$[$from to last]',
                                      jsonb_build_object('from', jsonb_array_length(audit) - 20 + 1))
            || jsonb_build_array(jsonb_build_object('at', (SELECT t FROM now_), 'who', $2::text, 'what', 'cancel')) END
-- through ``was``: read (and locked) before this update changes the row, which ``kept``
-- (run once this update is done) could no longer lock
WHERE id = (SELECT id FROM was) AND state IN ('pending', 'running', 'waiting')
  AND NOT (state = 'running' AND cancel_requested)
RETURNING state

-- name: JOB_LIST
-- Jobs matching a filter, newest first; every condition is optional. $10 pages by keyset
-- (ids below the previous page's last): a backward walk of the primary key from there, never
-- OFFSET (a range on id, not "IS NULL OR", so even a generic plan seeks to it).
SELECT id, task, queue, state, args::text AS args, kwargs::text AS kwargs, priority,
       attempt, max_attempts, extract(epoch FROM run_at) AS run_at,
       extract(epoch FROM created_at) AS created_at,
       extract(epoch FROM attempted_at) AS attempted_at,
       extract(epoch FROM finished_at) AS finished_at, locked_by,
       extract(epoch FROM lease_expires_at) AS lease_expires_at, errors::text AS errors,
       correlation_id, audit::text AS audit, extract(epoch FROM started_at) AS started_at,
       result::text AS result, progress::text AS progress, payload_version, unique_key,
       extract(epoch FROM unique_until) AS unique_until, concurrency_key, key_limit,
       key_order, key_weight, lane
FROM {s}.skiplock_jobs
WHERE ($1::text IS NULL OR state = $1)
  AND ($2::bigint[] IS NULL OR id = ANY($2))
  AND ($3::text IS NULL OR task = $3)
  AND ($4::text IS NULL OR queue = $4)
  AND ($5::text IS NULL OR CASE WHEN jsonb_typeof(errors) = 'array' THEN EXISTS (
      SELECT 1 FROM jsonb_array_elements(errors) e
      WHERE strpos(lower(e ->> 'message'), lower($5)) > 0) ELSE false END)
  AND ($6::timestamptz IS NULL OR coalesce(finished_at, created_at) >= $6)
  AND ($7::timestamptz IS NULL OR coalesce(finished_at, created_at) < $7)
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8) /*part*/
  AND id < coalesce($10::bigint, 9223372036854775807)
ORDER BY id DESC
LIMIT $9

-- name: JOB_LIST_OLDEST
-- Jobs matching a filter, oldest first: the ones a bulk action with the same filter and
-- limit acts on ($10 pages forward: ids above the previous page's last).
SELECT id, task, queue, state, args::text AS args, kwargs::text AS kwargs, priority,
       attempt, max_attempts, extract(epoch FROM run_at) AS run_at,
       extract(epoch FROM created_at) AS created_at,
       extract(epoch FROM attempted_at) AS attempted_at,
       extract(epoch FROM finished_at) AS finished_at, locked_by,
       extract(epoch FROM lease_expires_at) AS lease_expires_at, errors::text AS errors,
       correlation_id, audit::text AS audit, extract(epoch FROM started_at) AS started_at,
       result::text AS result, progress::text AS progress, payload_version, unique_key,
       extract(epoch FROM unique_until) AS unique_until, concurrency_key, key_limit,
       key_order, key_weight, lane
FROM {s}.skiplock_jobs
WHERE ($1::text IS NULL OR state = $1)
  AND ($2::bigint[] IS NULL OR id = ANY($2))
  AND ($3::text IS NULL OR task = $3)
  AND ($4::text IS NULL OR queue = $4)
  AND ($5::text IS NULL OR CASE WHEN jsonb_typeof(errors) = 'array' THEN EXISTS (
      SELECT 1 FROM jsonb_array_elements(errors) e
      WHERE strpos(lower(e ->> 'message'), lower($5)) > 0) ELSE false END)
  AND ($6::timestamptz IS NULL OR coalesce(finished_at, created_at) >= $6)
  AND ($7::timestamptz IS NULL OR coalesce(finished_at, created_at) < $7)
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8) /*part*/
  AND id > coalesce($10::bigint, 0)
ORDER BY id
LIMIT $9

-- name: JOB_COUNT
-- How many jobs match JOB_LIST's filter (a bulk action's preview).
SELECT count(*) FROM {s}.skiplock_jobs
WHERE ($1::text IS NULL OR state = $1)
  AND ($2::bigint[] IS NULL OR id = ANY($2))
  AND ($3::text IS NULL OR task = $3)
  AND ($4::text IS NULL OR queue = $4)
  AND ($5::text IS NULL OR CASE WHEN jsonb_typeof(errors) = 'array' THEN EXISTS (
      SELECT 1 FROM jsonb_array_elements(errors) e
      WHERE strpos(lower(e ->> 'message'), lower($5)) > 0) ELSE false END)
  AND ($6::timestamptz IS NULL OR coalesce(finished_at, created_at) >= $6)
  AND ($7::timestamptz IS NULL OR coalesce(finished_at, created_at) < $7)
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8) /*part*/

-- name: JOB_COUNT_STATES
-- How many jobs match JOB_LIST's filter in each state ($1 is NULL: every state), in one
-- pass of each partition read (the Jobs page's counts).
SELECT state, count(*) AS n FROM {s}.skiplock_jobs
WHERE ($1::text IS NULL OR state = $1)
  AND ($2::bigint[] IS NULL OR id = ANY($2))
  AND ($3::text IS NULL OR task = $3)
  AND ($4::text IS NULL OR queue = $4)
  AND ($5::text IS NULL OR CASE WHEN jsonb_typeof(errors) = 'array' THEN EXISTS (
      SELECT 1 FROM jsonb_array_elements(errors) e
      WHERE strpos(lower(e ->> 'message'), lower($5)) > 0) ELSE false END)
  AND ($6::timestamptz IS NULL OR coalesce(finished_at, created_at) >= $6)
  AND ($7::timestamptz IS NULL OR coalesce(finished_at, created_at) < $7)
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8) /*part*/
GROUP BY state

-- name: JOB_FIND
-- Jobs whose unique key or correlation id is exactly $1, newest first (a person's search:
-- no index serves a finished job's key or a correlation id, so this reads the table).
SELECT id, task, queue, state, args::text AS args, kwargs::text AS kwargs, priority,
       attempt, max_attempts, extract(epoch FROM run_at) AS run_at,
       extract(epoch FROM created_at) AS created_at,
       extract(epoch FROM attempted_at) AS attempted_at,
       extract(epoch FROM finished_at) AS finished_at, locked_by,
       extract(epoch FROM lease_expires_at) AS lease_expires_at, errors::text AS errors,
       correlation_id, audit::text AS audit, extract(epoch FROM started_at) AS started_at,
       result::text AS result, progress::text AS progress, payload_version, unique_key,
       extract(epoch FROM unique_until) AS unique_until, concurrency_key, key_limit,
       key_order, key_weight, lane
FROM {s}.skiplock_jobs WHERE (unique_key = $1 OR correlation_id = $1) /*part*/
ORDER BY id DESC LIMIT $2

-- name: JOB_DEAD_GROUPS
-- Dead jobs by task and last error message, the largest groups first: the dead partition by
-- name, so no other is planned or locked.
SELECT task, coalesce(errors -> -1 ->> 'message', '') AS error, count(*) AS n,
       max(id) AS last_id, extract(epoch FROM max(finished_at)) AS last_at
FROM {s}.skiplock_jobs_dead
WHERE state = 'dead'
GROUP BY 1, 2
ORDER BY n DESC, task, error
LIMIT $1

-- name: JOB_REQUEUE_DEAD
-- A person requeues dead jobs matching a filter: pending now, attempts reset, action recorded.
WITH now_ AS (SELECT coalesce($9::timestamptz, now()) AS t),

-- at most the filter's limit ($11), oldest first: the jobs JOB_LIST_OLDEST shows with the
-- same filter, chosen and locked in this statement (a row another session changes meanwhile
-- is re-checked against the filter and dropped, never replaced by one past the limit),
-- locked in id order like every statement that may wait on several job rows
picked AS (
    SELECT id FROM {s}.skiplock_jobs
    WHERE state = 'dead'
  AND ($2::bigint[] IS NULL OR id = ANY($2))
  AND ($3::text IS NULL OR task = $3)
  AND ($4::text IS NULL OR queue = $4)
  AND ($5::text IS NULL OR CASE WHEN jsonb_typeof(errors) = 'array' THEN EXISTS (
      SELECT 1 FROM jsonb_array_elements(errors) e
      WHERE strpos(lower(e ->> 'message'), lower($5)) > 0) ELSE false END)
  AND ($6::timestamptz IS NULL OR finished_at >= $6)
  AND ($7::timestamptz IS NULL OR finished_at < $7)
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8)
    ORDER BY id
    LIMIT $11
    FOR NO KEY UPDATE
),
-- the key rows of the picked jobs' keys whose windows have passed go first: the requeued
-- job's trigger takes its key after this statement's changes
freed AS (
    DELETE FROM {s}.skiplock_keys k
    WHERE k.held_until <= (SELECT t FROM now_)
      AND (k.unique_key, k.unique_scope) IN (
          SELECT j.unique_key, coalesce(j.unique_scope, j.task) FROM {s}.skiplock_jobs j
          WHERE j.state = 'dead' AND j.id IN (SELECT id FROM picked))
),
r AS (
    UPDATE {s}.skiplock_jobs
    SET state = 'pending', attempt = 0, run_at = (SELECT t FROM now_), finished_at = NULL,
        lease_token = NULL, lease_expires_at = NULL, cancel_requested = false,
        audit = CASE WHEN jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) < 20
        THEN audit || jsonb_build_array(jsonb_build_object('at', (SELECT t FROM now_), 'who', $1::text, 'what', 'requeue'))
        ELSE jsonb_build_array(jsonb_build_object(
                'at', audit -> (jsonb_array_length(audit) - 20) -> 'at',
                'who', 'skiplock',
                'what', format('%s earlier actions left out', coalesce((audit -> 0 ->> 'omitted')::bigint, 0) + (jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)),
                'omitted', coalesce((audit -> 0 ->> 'omitted')::bigint, 0) + (jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)))
            || jsonb_path_query_array(audit, '$[$from to last]',
                                      jsonb_build_object('from', jsonb_array_length(audit) - 20 + 1))
            || jsonb_build_array(jsonb_build_object('at', (SELECT t FROM now_), 'who', $1::text, 'what', 'requeue')) END
    WHERE state = 'dead' AND id IN (SELECT id FROM picked)
      -- one that died waiting for its parents (a body buried for the size of their
      -- results) never got them: only its own retry (job retry) may send it back
      AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_unreleased u
                      WHERE u.job_id = {s}.skiplock_jobs.id)
  -- a dead job whose unique key a live job now holds stays dead (requeueing it would break
  -- the key's promise); the caller reports it
  AND (unique_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM {s}.skiplock_keys k WHERE k.unique_key = skiplock_jobs.unique_key
        AND k.unique_scope = coalesce(skiplock_jobs.unique_scope, skiplock_jobs.task)
        AND (k.held_until IS NULL OR k.held_until > (SELECT t FROM now_))))
    RETURNING id, queue
), woken AS (
    SELECT pg_notify($10, q.queue) FROM (SELECT DISTINCT queue FROM r) q
)
SELECT id FROM r WHERE (SELECT count(*) FROM woken) >= 0 ORDER BY id

-- name: JOB_DISCARD_DEAD
-- A person discards dead jobs matching a filter: they become cancelled, action recorded.
WITH now_ AS (SELECT coalesce($9::timestamptz, now()) AS t),

-- at most the filter's limit ($10), oldest first: the jobs JOB_LIST_OLDEST shows with the
-- same filter, chosen and locked in this statement (a row another session changes meanwhile
-- is re-checked against the filter and dropped, never replaced by one past the limit),
-- locked in id order like every statement that may wait on several job rows
picked AS (
    SELECT id FROM {s}.skiplock_jobs
    WHERE state = 'dead'
  AND ($2::bigint[] IS NULL OR id = ANY($2))
  AND ($3::text IS NULL OR task = $3)
  AND ($4::text IS NULL OR queue = $4)
  AND ($5::text IS NULL OR CASE WHEN jsonb_typeof(errors) = 'array' THEN EXISTS (
      SELECT 1 FROM jsonb_array_elements(errors) e
      WHERE strpos(lower(e ->> 'message'), lower($5)) > 0) ELSE false END)
  AND ($6::timestamptz IS NULL OR finished_at >= $6)
  AND ($7::timestamptz IS NULL OR finished_at < $7)
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8)
    ORDER BY id
    LIMIT $10
    FOR NO KEY UPDATE
),
d AS (
    UPDATE {s}.skiplock_jobs
    SET state = 'cancelled', finished_at = (SELECT t FROM now_),
        audit = CASE WHEN jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) < 20
        THEN audit || jsonb_build_array(jsonb_build_object('at', (SELECT t FROM now_), 'who', $1::text, 'what', 'discard'))
        ELSE jsonb_build_array(jsonb_build_object(
                'at', audit -> (jsonb_array_length(audit) - 20) -> 'at',
                'who', 'skiplock',
                'what', format('%s earlier actions left out', coalesce((audit -> 0 ->> 'omitted')::bigint, 0) + (jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)),
                'omitted', coalesce((audit -> 0 ->> 'omitted')::bigint, 0) + (jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)))
            || jsonb_path_query_array(audit, '$[$from to last]',
                                      jsonb_build_object('from', jsonb_array_length(audit) - 20 + 1))
            || jsonb_build_array(jsonb_build_object('at', (SELECT t FROM now_), 'who', $1::text, 'what', 'discard')) END
    WHERE state = 'dead' AND id IN (SELECT id FROM picked)
    RETURNING id
)
-- in id order: the rows move to another partition, which returns them in its own
SELECT id FROM d ORDER BY id
