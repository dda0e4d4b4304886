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
