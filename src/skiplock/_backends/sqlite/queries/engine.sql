-- name: TRANSACTION_BEGIN_IMMEDIATE
BEGIN IMMEDIATE

-- name: TRANSACTION_BEGIN_DEFERRED
BEGIN

-- name: TRANSACTION_BEGIN_AS
BEGIN {mode}

-- name: TRANSACTION_COMMIT
COMMIT

-- name: TRANSACTION_ROLLBACK
ROLLBACK

-- name: WORKFLOW_SAVEPOINT
SAVEPOINT skiplock_workflow

-- name: WORKFLOW_SAVEPOINT_ROLLBACK
ROLLBACK TO skiplock_workflow

-- name: WORKFLOW_SAVEPOINT_RELEASE
RELEASE skiplock_workflow

-- name: PRAGMA_BUSY_TIMEOUT
PRAGMA busy_timeout = {ms}

-- name: PRAGMA_JOURNAL_WAL
PRAGMA journal_mode = WAL

-- name: PRAGMA_SYNCHRONOUS
PRAGMA synchronous = {mode}

-- name: PRAGMA_SCHEMA_VERSION
PRAGMA schema_version

-- name: PRAGMA_SCHEMA_VERSION_SET
PRAGMA schema_version = {version}

-- name: PRAGMA_WRITABLE_SCHEMA_ON
PRAGMA writable_schema = ON

-- name: PRAGMA_WRITABLE_SCHEMA_OFF
PRAGMA writable_schema = OFF

-- name: SCHEMA_TABLE_SQL_REPLACE
UPDATE sqlite_master SET sql = replace(sql, ?, ?) WHERE type = 'table' AND name = 'skiplock_jobs_live'

-- name: WAL_CHECKPOINT_PASSIVE
PRAGMA wal_checkpoint(PASSIVE)

-- name: WAL_CHECKPOINT_TRUNCATE
PRAGMA wal_checkpoint(TRUNCATE)

-- name: PAGE_SIZE
PRAGMA page_size
