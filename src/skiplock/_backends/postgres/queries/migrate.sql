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
