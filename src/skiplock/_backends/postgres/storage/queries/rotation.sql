-- name: ROTATE_LOCK
SELECT pg_try_advisory_xact_lock(hashtext('skiplock rotation ' || $1))

-- name: TABLES
SELECT c.relname, p.relname AS parent, coalesce(i.inhdetachpending, false) AS pending,
       CASE WHEN c.relkind = 'r' THEN pg_relation_size(c.oid) ELSE 0 END AS bytes
FROM pg_class c
LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
LEFT JOIN pg_class p ON p.oid = i.inhparent
WHERE c.relnamespace = to_regnamespace($1) AND c.relname ~ '^skiplock_jobs_live_s[0-9]+(_p)?$'

-- name: GENERATION_MOVE_ASIDE
-- Move the live jobs of a generation (its number, its table) to the long segment, skipping
-- rows a worker holds; count them, and wake the workers of each queue a pending job
-- moved in ($1, the channel: at commit). A claim skips the rows this holds, so one that came
-- up short meanwhile would otherwise wait out its poll interval.
WITH m AS (UPDATE {s}.skiplock_jobs SET segment = {long} WHERE state IN ('pending', 'running') AND segment = {segment} AND id IN (SELECT id FROM {s}.{table} FOR UPDATE SKIP LOCKED) RETURNING queue, state) SELECT (SELECT count(*) FROM m) AS moved, (SELECT count(pg_notify($1, q.queue))  FROM (SELECT DISTINCT queue FROM m WHERE state = 'pending') q) AS woken

-- name: GENERATION_ANY_ROW
SELECT EXISTS (SELECT 1 FROM {s}.{table})

-- name: GENERATION_DETACH
ALTER TABLE {s}.{wrapper} DETACH PARTITION {s}.{table} CONCURRENTLY

-- name: GENERATION_DETACH_FINALIZE
ALTER TABLE {s}.{wrapper} DETACH PARTITION {s}.{table} FINALIZE

-- name: WRAPPER_LEAVE_LIVE
ALTER TABLE {s}.skiplock_jobs_live DETACH PARTITION {s}.{wrapper} CONCURRENTLY

-- name: WRAPPER_LEAVE_LIVE_FINALIZE
ALTER TABLE {s}.skiplock_jobs_live DETACH PARTITION {s}.{wrapper} FINALIZE

-- name: LOCK_TIMEOUT
SET LOCAL lock_timeout = {ms}

-- name: DETACHED_LOCK
LOCK TABLE {s}.{table} IN ACCESS EXCLUSIVE MODE

-- name: DETACHED_COLUMNS
SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped

-- name: DETACHED_MOVE_BACK
INSERT INTO {s}.skiplock_jobs ({columns}) SELECT {picked} FROM {s}.{table} RETURNING queue, state

-- name: QUEUE_WAKE
SELECT pg_notify($1, $2)

-- name: DETACHED_DROP
DROP TABLE {s}.{table}

-- name: POINTER_MOVE
SELECT setval('{s}.skiplock_live_segment', {segment}, true)

-- name: POINTER_NOW
SELECT pg_sequence_last_value('{s}.skiplock_live_segment'::regclass)
