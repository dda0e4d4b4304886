-- name: EXPORT
SELECT coalesce($1::timestamptz, now()) AS now, pg_export_snapshot() AS snapshot

-- name: IMPORT_SNAPSHOT
-- The rest's session takes the live part's snapshot (EXPORT), then the read lock timeout. The
-- snapshot cannot be a parameter: a literal checked and quoted (sql_files.quote_literal).
SET TRANSACTION SNAPSHOT {snapshot}; SET LOCAL lock_timeout = {ms}

-- name: JOB_COUNT_BY_STATE_LIVE_PART
-- Jobs per state, optionally for one queue; running jobs not yet started count as claimed.
SELECT CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END AS state,
       count(*) AS n
FROM {s}.skiplock_jobs
WHERE ($1::text IS NULL OR queue = $1) AND state IN ('pending', 'running') GROUP BY 1

-- name: JOB_COUNT_BY_STATE_REST_PART
-- Jobs per state, optionally for one queue; running jobs not yet started count as claimed.
SELECT CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END AS state,
       count(*) AS n
FROM {s}.skiplock_jobs
WHERE ($1::text IS NULL OR queue = $1) AND state IN ('succeeded', 'cancelled', 'dead', 'waiting') GROUP BY 1

-- name: JOB_COUNT_BY_QUEUE_LIVE_PART
-- Jobs per queue and state (running jobs not yet started count as claimed): the Overview's.
SELECT queue,
       CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END AS state,
       count(*) AS n
FROM {s}.skiplock_jobs
WHERE true AND state IN ('pending', 'running') GROUP BY 1, 2

-- name: JOB_COUNT_BY_QUEUE_REST_PART
-- Jobs per queue and state (running jobs not yet started count as claimed): the Overview's.
SELECT queue,
       CASE WHEN state = 'running' AND started_at IS NULL THEN 'claimed' ELSE state END AS state,
       count(*) AS n
FROM {s}.skiplock_jobs
WHERE true AND state IN ('succeeded', 'cancelled', 'dead', 'waiting') GROUP BY 1, 2

-- name: JOB_LIST_LIVE_PART
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
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8) AND state IN ('pending', 'running')
  AND id < coalesce($10::bigint, 9223372036854775807)
ORDER BY id DESC
LIMIT $9

-- name: JOB_LIST_REST_PART
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
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8) AND state IN ('succeeded', 'cancelled', 'dead', 'waiting')
  AND id < coalesce($10::bigint, 9223372036854775807)
ORDER BY id DESC
LIMIT $9

-- name: JOB_LIST_OLDEST_LIVE_PART
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
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8) AND state IN ('pending', 'running')
  AND id > coalesce($10::bigint, 0)
ORDER BY id
LIMIT $9

-- name: JOB_LIST_OLDEST_REST_PART
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
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8) AND state IN ('succeeded', 'cancelled', 'dead', 'waiting')
  AND id > coalesce($10::bigint, 0)
ORDER BY id
LIMIT $9

-- name: JOB_COUNT_LIVE_PART
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
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8) AND state IN ('pending', 'running')

-- name: JOB_COUNT_REST_PART
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
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8) AND state IN ('succeeded', 'cancelled', 'dead', 'waiting')

-- name: JOB_COUNT_STATES_LIVE_PART
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
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8) AND state IN ('pending', 'running')
GROUP BY state

-- name: JOB_COUNT_STATES_REST_PART
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
  AND ($8::text IS NULL OR coalesce(errors -> -1 ->> 'message', '') = $8) AND state IN ('succeeded', 'cancelled', 'dead', 'waiting')
GROUP BY state

-- name: JOB_FIND_LIVE_PART
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
FROM {s}.skiplock_jobs WHERE (unique_key = $1 OR correlation_id = $1) AND state IN ('pending', 'running')
ORDER BY id DESC LIMIT $2

-- name: JOB_FIND_REST_PART
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
FROM {s}.skiplock_jobs WHERE (unique_key = $1 OR correlation_id = $1) AND state IN ('succeeded', 'cancelled', 'dead', 'waiting')
ORDER BY id DESC LIMIT $2

-- name: JOB_LIST_IN_LIVE
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
FROM {s}.skiplock_jobs_live
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

-- name: JOB_LIST_IN_DONE
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
FROM {s}.skiplock_jobs_done
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

-- name: JOB_LIST_IN_DEAD
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
FROM {s}.skiplock_jobs_dead
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

-- name: JOB_LIST_IN_WAITING
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
FROM {s}.skiplock_jobs_waiting
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

-- name: JOB_LIST_OLDEST_IN_LIVE
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
FROM {s}.skiplock_jobs_live
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

-- name: JOB_LIST_OLDEST_IN_DONE
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
FROM {s}.skiplock_jobs_done
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

-- name: JOB_LIST_OLDEST_IN_DEAD
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
FROM {s}.skiplock_jobs_dead
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

-- name: JOB_LIST_OLDEST_IN_WAITING
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
FROM {s}.skiplock_jobs_waiting
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

-- name: JOB_COUNT_IN_LIVE
-- How many jobs match JOB_LIST's filter (a bulk action's preview).
SELECT count(*) FROM {s}.skiplock_jobs_live
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

-- name: JOB_COUNT_IN_DONE
-- How many jobs match JOB_LIST's filter (a bulk action's preview).
SELECT count(*) FROM {s}.skiplock_jobs_done
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

-- name: JOB_COUNT_IN_DEAD
-- How many jobs match JOB_LIST's filter (a bulk action's preview).
SELECT count(*) FROM {s}.skiplock_jobs_dead
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

-- name: JOB_COUNT_IN_WAITING
-- How many jobs match JOB_LIST's filter (a bulk action's preview).
SELECT count(*) FROM {s}.skiplock_jobs_waiting
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

-- name: JOB_COUNT_STATES_IN_LIVE
-- How many jobs match JOB_LIST's filter in each state ($1 is NULL: every state), in one
-- pass of each partition read (the Jobs page's counts).
SELECT state, count(*) AS n FROM {s}.skiplock_jobs_live
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

-- name: JOB_COUNT_STATES_IN_DONE
-- How many jobs match JOB_LIST's filter in each state ($1 is NULL: every state), in one
-- pass of each partition read (the Jobs page's counts).
SELECT state, count(*) AS n FROM {s}.skiplock_jobs_done
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

-- name: JOB_COUNT_STATES_IN_DEAD
-- How many jobs match JOB_LIST's filter in each state ($1 is NULL: every state), in one
-- pass of each partition read (the Jobs page's counts).
SELECT state, count(*) AS n FROM {s}.skiplock_jobs_dead
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

-- name: JOB_COUNT_STATES_IN_WAITING
-- How many jobs match JOB_LIST's filter in each state ($1 is NULL: every state), in one
-- pass of each partition read (the Jobs page's counts).
SELECT state, count(*) AS n FROM {s}.skiplock_jobs_waiting
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

-- name: READ_LIVE_LOCK
SET LOCAL lock_timeout = {ms}; LOCK TABLE {s}.skiplock_jobs_live IN ACCESS SHARE MODE
