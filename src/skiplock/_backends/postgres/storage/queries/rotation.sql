-- name: ROTATE_LOCK
SELECT pg_try_advisory_xact_lock(hashtext('skiplock rotation ' || $1))

-- name: TABLES
SELECT c.relname, p.relname AS parent, coalesce(i.inhdetachpending, false) AS pending,
       CASE WHEN c.relkind = 'r' THEN pg_relation_size(c.oid) ELSE 0 END AS bytes
FROM pg_class c
LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
LEFT JOIN pg_class p ON p.oid = i.inhparent
WHERE c.relnamespace = to_regnamespace($1) AND c.relname ~ '^skiplock_jobs_live_s[0-9]+(_p)?$'
