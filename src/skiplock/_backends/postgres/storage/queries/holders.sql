-- name: OLD_SESSIONS
SELECT EXISTS (
    SELECT 1 FROM pg_stat_activity
    WHERE pid <> pg_backend_pid() AND datname = current_database()
      AND xact_start <= now() - make_interval(secs => $1)
) OR EXISTS (
    SELECT 1 FROM pg_prepared_xacts WHERE database = current_database()
)

-- name: LOCK_HOLDERS
WITH rel AS (
    SELECT r.oid, r.oid::regclass::text AS name
    FROM unnest($1::text[]) AS n, LATERAL (SELECT to_regclass(n) AS oid) AS r
    WHERE r.oid IS NOT NULL
), held AS (
    SELECT l.pid, l.virtualtransaction, array_agg(DISTINCT rel.name) AS relations
    FROM pg_locks l JOIN rel ON rel.oid = l.relation
    WHERE l.locktype = 'relation' AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.pid IS DISTINCT FROM pg_backend_pid()
    GROUP BY l.pid, l.virtualtransaction
)
SELECT 'session' AS kind, a.pid, a.application_name AS name, a.state, a.backend_start,
       a.xact_start, a.query_start,
       extract(epoch FROM now() - a.xact_start)::float8 AS xact_age_s,
       NULL::bigint AS xmin_age, a.query, h.relations
FROM held h JOIN pg_stat_activity a ON a.pid = h.pid
WHERE a.xact_start <= now() - make_interval(secs => $2)
UNION ALL
SELECT 'prepared transaction', NULL, p.gid, 'prepared', NULL, p.prepared, NULL,
       extract(epoch FROM now() - p.prepared)::float8, age(p.transaction)::bigint, '',
       h.relations
FROM held h JOIN pg_prepared_xacts p
  ON h.pid IS NULL AND h.virtualtransaction = '-1/' || p.transaction::text
WHERE p.prepared <= now() - make_interval(secs => $2)
ORDER BY xact_age_s DESC

-- name: HORIZON_HOLDERS
WITH young AS (
    SELECT coalesce(max(greatest(age(backend_xid), age(backend_xmin))), 0) AS xids
    FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
      AND xact_start > now() - make_interval(secs => $1)
)
SELECT * FROM (
    SELECT 'session' AS kind, a.pid, a.application_name AS name, a.state, a.backend_start,
           a.xact_start, a.query_start,
           extract(epoch FROM now() - a.xact_start)::float8 AS xact_age_s,
           greatest(age(a.backend_xid), age(a.backend_xmin))::bigint AS xmin_age, a.query,
           NULL::text[] AS relations
    FROM pg_stat_activity a
    WHERE a.pid <> pg_backend_pid()
      AND (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)
      AND ((a.datname = current_database()
            AND a.xact_start <= now() - make_interval(secs => $1))
           OR (a.backend_type = 'walsender'
               AND greatest(age(a.backend_xid), age(a.backend_xmin)) > (SELECT xids FROM young)))
    UNION ALL
    SELECT 'replication slot', s.active_pid, s.slot_name,
           CASE WHEN s.active THEN 'active' ELSE 'inactive' END, NULL, NULL, NULL, NULL,
           age(s.xmin)::bigint, '', NULL
    FROM pg_replication_slots s
    WHERE s.xmin IS NOT NULL AND (NOT s.active OR age(s.xmin) > (SELECT xids FROM young))
    UNION ALL
    SELECT 'prepared transaction', NULL, p.gid, 'prepared', NULL, p.prepared, NULL,
           extract(epoch FROM now() - p.prepared)::float8, age(p.transaction)::bigint, '', NULL
    FROM pg_prepared_xacts p
    WHERE p.database = current_database()
      AND p.prepared <= now() - make_interval(secs => $1)
) h
ORDER BY xmin_age DESC NULLS LAST, xact_age_s DESC NULLS LAST
LIMIT $2

-- name: DEAD_IN
SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_all_tables
WHERE relid IN (SELECT to_regclass(n) FROM unnest($1::text[]) AS n)
