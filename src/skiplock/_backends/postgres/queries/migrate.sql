-- name: MIGRATIONS_TABLE
-- Record of applied migrations; created before anything else.
CREATE TABLE IF NOT EXISTS {s}.skiplock_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: SCHEMA_CREATE
CREATE SCHEMA IF NOT EXISTS {s}

-- name: MIGRATIONS_LOCK
-- Serialise concurrent migrators; transaction-scoped, so nothing leaks through a pooler.
SELECT pg_advisory_xact_lock(hashtext('skiplock_migrate:' || $1))

-- name: MIGRATION_VERSIONS
SELECT version FROM {s}.skiplock_migrations ORDER BY version

-- name: MIGRATION_RECORD
INSERT INTO {s}.skiplock_migrations (version, name) VALUES ($1, $2)

-- name: MIGRATIONS_TABLE_EXISTS
-- Whether skiplock was ever migrated into this schema.
SELECT to_regclass($1 || '.skiplock_migrations') IS NOT NULL

-- name: SCHEMA_VERSION
SELECT coalesce(max(version), 0) FROM {s}.skiplock_migrations

-- name: DATABASE_NUMBER
-- This database's number (skiplock_database): $1 recorded if none is yet; the recorded one
-- returned either way (the caller refuses a difference). DO UPDATE, not DO NOTHING: two
-- migrators at once, the second waits for the first's row and still returns it (a subquery
-- after DO NOTHING reads the statement's snapshot, from before that row). A database
-- numbered $1 > 0 draws its job ids from $1 * $2 on: the id sequence is moved up there, once,
-- when its row is made (xmax = 0: inserted, not updated).
WITH ins AS (
    INSERT INTO {s}.skiplock_database AS d (number) VALUES ($1)
    ON CONFLICT (one) DO UPDATE SET number = d.number
    RETURNING d.number, d.xmax = 0 AS made
), moved AS (
    SELECT setval('{s}.skiplock_job_ids', $1::bigint * $2::bigint)
    FROM ins, {s}.skiplock_job_ids s
    WHERE ins.made AND ins.number > 0 AND s.last_value < $1::bigint * $2::bigint
)
SELECT number, (SELECT count(*) FROM moved) AS moved FROM ins

-- name: DATABASE_NUMBER_TABLE
-- Whether the session's database holds skiplock's number table in this schema ($1, quoted):
-- asked first, on a caller's connection, so a wrong database answers "none" rather than
-- failing (and aborting) the caller's transaction.
SELECT to_regclass($1 || '.skiplock_database') IS NOT NULL

-- name: DATABASE_NUMBER_READ
-- The number this database was given (no row: none yet).
SELECT number FROM {s}.skiplock_database
