-- name: LIST_PARTITIONS
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = '{s}.skiplock_jobs_done'::regclass

-- name: UPKEEP_LOCK
SELECT pg_try_advisory_xact_lock(hashtext('skiplock storage ' || $1))

-- name: DB_NOW
SELECT coalesce($1::timestamptz, now())

-- name: EXISTS
SELECT to_regclass($1) IS NOT NULL

-- name: DEAD_LIVE
WITH RECURSIVE t AS (
    SELECT inhrelid AS relid FROM pg_inherits
    WHERE inhparent = to_regclass($1) AND NOT inhdetachpending
    UNION ALL
    SELECT i.inhrelid FROM pg_inherits i JOIN t ON i.inhparent = t.relid
    WHERE NOT i.inhdetachpending
)
SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_all_tables WHERE relid IN (SELECT relid FROM t)

-- name: DAY_TABLE
CREATE TABLE {s}.{day} (LIKE {s}.skiplock_jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)

-- name: DAY_ID_INDEX
CREATE INDEX {id_idx} ON {s}.{day} (id)

-- name: DAY_FINISHED_INDEX
CREATE INDEX {finished_idx} ON {s}.{day} (finished_at)

-- name: DAY_RECLAIMED_INDEX
CREATE INDEX {reclaimed_idx} ON {s}.{day} (reclaimed_at) WHERE reclaimed_at IS NOT NULL

-- name: DAY_MOVE_IN
WITH moved AS (DELETE FROM {s}.skiplock_jobs_done_default WHERE finished_at >= '{lower} 00:00+00' AND finished_at < '{upper} 00:00+00' RETURNING *) INSERT INTO {s}.{day} SELECT * FROM moved

-- name: DAY_ATTACH
ALTER TABLE {s}.skiplock_jobs_done ATTACH PARTITION {s}.{day} FOR VALUES FROM ('{lower} 00:00+00') TO ('{upper} 00:00+00')

-- name: DAY_LOCK
LOCK TABLE {s}.{day} IN ACCESS EXCLUSIVE MODE

-- name: DAY_COUNT
SELECT count(*) FROM {s}.{day}

-- name: DAY_KEYS_RELEASE
DELETE FROM {s}.skiplock_keys k USING {s}.{day} p WHERE p.id = k.job_id

-- name: DAY_DROP
DROP TABLE {s}.{day}

-- name: LIVE_VACUUM
-- The live partition's vacuum (hot_vacuum): VERBOSE for its own report of what it removed and
-- kept, SKIP_LOCKED to move on rather than queue, no truncation (its ACCESS EXCLUSIVE lock).
VACUUM (VERBOSE, SKIP_LOCKED, TRUNCATE false) {s}.skiplock_jobs_live

-- name: JOBS_ANALYZE
ANALYZE {s}.skiplock_jobs
