-- name: MIGRATIONS_TABLE
-- Record of applied migrations; created before anything else.
CREATE TABLE IF NOT EXISTS skiplock_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at REAL NOT NULL
)

-- name: MIGRATION_VERSIONS
SELECT version FROM skiplock_migrations ORDER BY version

-- name: MIGRATION_RECORD
INSERT INTO skiplock_migrations (version, name, applied_at) VALUES (:version, :name, :now)

-- name: MIGRATIONS_TABLE_EXISTS
-- Whether skiplock was ever migrated here (SQLite cannot name a missing table in a CASE).
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'skiplock_migrations'

-- name: SCHEMA_VERSION
SELECT coalesce(max(version), 0) FROM skiplock_migrations
