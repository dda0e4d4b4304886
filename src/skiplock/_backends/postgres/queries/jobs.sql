-- name: JOB_INSERT_MANY
-- Insert a batch from parallel arrays, all or nothing against bounded queues: a queue whose
-- live depth plus this batch would pass its max_depth comes back as a 'full' row and nothing
-- is inserted. Live unique keys are skipped (looked up by the caller). NOTIFY once per queue,
-- delivered at commit. $24: each job's lane (NULL: every one 'default', the column's default).
WITH batch AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[],
                         $7::float8[], $8::float8[], $9::float8[], $10::text[], $13::float8[],
                         $14::text[], $15::bool[], $16::text[], $17::int[], $18::text[],
                         $19::int[], $20::text[], $21::float8[], $22::int[], $23::text[],
                         $24::text[])
         WITH ORDINALITY AS u(task, queue, args, kwargs, priority, max_attempts, run_at,
                              run_after, timeout, correlation_id, lease_s, unique_key,
                              unique_succeeded, trace_context, payload_version,
                              concurrency_key, key_limit, key_order, unique_for, key_weight,
                              unique_scope, lane, ord)
), full_ AS (
    SELECT q.name FROM {s}.skiplock_queues q JOIN (SELECT queue, count(*) AS n FROM batch GROUP BY queue) b ON b.queue = q.name
    WHERE q.max_depth IS NOT NULL
      AND b.n + (SELECT count(*) FROM {s}.skiplock_jobs j
                 WHERE j.queue = q.name AND j.state = 'pending')
              + (SELECT count(*) FROM {s}.skiplock_jobs j
                 WHERE j.queue = q.name AND j.state = 'running') > q.max_depth
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
         segment, lane)
    SELECT u.id, u.task, u.queue, u.args::jsonb, u.kwargs::jsonb, u.priority, u.max_attempts,
           coalesce(to_timestamp(u.run_at), coalesce($12::timestamptz, now())
                    + make_interval(secs => coalesce(u.run_after, 0))),
           u.timeout, u.correlation_id, u.lease_s, u.unique_key, u.unique_succeeded,
           u.trace_context, u.payload_version, u.concurrency_key, u.key_limit, u.key_order,
           coalesce($12::timestamptz, now()) + make_interval(secs => u.unique_for),
           u.key_weight, u.unique_scope,
           -- a keyed job goes to the keyed segment, any other to the ring's (the default)
           CASE WHEN u.concurrency_key IS NULL THEN (SELECT pg_sequence_last_value('{s}.skiplock_live_segment'::regclass)::smallint) ELSE 4 END,
           coalesce(u.lane, 'default')
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

-- name: JOB_COPY_PREPARE
-- Ahead of a COPY of $3 rows (a large bulk enqueue without unique keys), in its transaction:
-- the bounded queues the batch would overfill ($1 queues, $2 rows for each), and if none,
-- $3 ids drawn from the jobs' identity, the time to schedule from, and a NOTIFY per queue
-- (delivered at commit, dropped if the COPY fails).
WITH batch AS (
    SELECT * FROM unnest($1::text[], $2::int[]) AS b(queue, n)
), full_ AS (
    SELECT q.name FROM {s}.skiplock_queues q JOIN batch b ON b.queue = q.name
    WHERE q.max_depth IS NOT NULL
      AND b.n + (SELECT count(*) FROM {s}.skiplock_jobs j
                 WHERE j.queue = q.name AND j.state = 'pending')
              + (SELECT count(*) FROM {s}.skiplock_jobs j
                 WHERE j.queue = q.name AND j.state = 'running') > q.max_depth
), ids AS (
    -- regclass resolved once: nextval(text) would look the name up again for every row
    SELECT nextval((SELECT pg_get_serial_sequence('{s}.skiplock_jobs', 'id')::regclass)) AS id
    FROM generate_series(1, $3)
    WHERE NOT EXISTS (SELECT 1 FROM full_)
)
SELECT array(SELECT name FROM full_) AS full,
       array(SELECT id FROM ids) AS ids,
       coalesce($5::timestamptz, now()) AS now,
       pg_sequence_last_value('{s}.skiplock_live_segment'::regclass)::smallint AS segment,
       (SELECT count(pg_notify($4, queue)) FROM batch WHERE NOT EXISTS (SELECT 1 FROM full_))
           AS woken

-- name: JOB_LIVE_BY_UNIQUE_KEY
-- The jobs holding these unique keys ($1) in these key spaces ($2), live, or succeeded where
-- the job asked for that.
SELECT k.job_id AS id, k.unique_key, k.unique_scope FROM {s}.skiplock_keys k
JOIN unnest($1::text[], $2::text[]) AS w(unique_key, unique_scope)
  ON k.unique_key = w.unique_key AND k.unique_scope = w.unique_scope
