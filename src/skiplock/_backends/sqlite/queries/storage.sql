-- name: DATA_VERSION
PRAGMA data_version

-- name: SCHEMA_PEEK
SELECT 1 FROM sqlite_master LIMIT 1
