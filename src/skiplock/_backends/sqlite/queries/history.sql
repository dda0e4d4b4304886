-- name: DAY_TABLES
SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB ?

-- name: TABLE_EXISTS
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?

-- name: TABLE_INFO
PRAGMA table_info({table})

-- name: DAY_ADD_COLUMN
ALTER TABLE {table} ADD COLUMN {column} {kind}

-- name: VIEW_DROP
DROP VIEW IF EXISTS skiplock_jobs

-- name: VIEW_CREATE
CREATE VIEW skiplock_jobs AS
{branches}

-- name: VIEW_BRANCH
SELECT {columns} FROM {table}

-- name: VIEW_INSERT_TRIGGER
CREATE TRIGGER skiplock_jobs_insert INSTEAD OF INSERT ON skiplock_jobs BEGIN
INSERT INTO skiplock_jobs_live ({columns}) VALUES ({values});
END

-- name: VIEW_INSERT_VALUE
NEW.{column}

-- name: VIEW_INSERT_VALUE_OR_DEFAULT
coalesce(NEW.{column}, {default})

-- name: VIEW_SET_COLUMN
{column} = NEW.{column}

-- name: VIEW_UPDATE_TRIGGER
CREATE TRIGGER skiplock_jobs_update INSTEAD OF UPDATE ON skiplock_jobs BEGIN
{statements}
END

-- name: VIEW_UPDATE_LIVE
UPDATE skiplock_jobs_live SET {sets} WHERE id = OLD.id;

-- name: VIEW_UPDATE_DAY
UPDATE {table} SET {sets} WHERE id = OLD.id;
INSERT INTO skiplock_jobs_live ({columns}) SELECT {columns} FROM {table} WHERE id = OLD.id AND (state NOT IN ('succeeded', 'cancelled') OR finished_at IS NULL OR finished_at < {lo} OR finished_at >= {hi});
DELETE FROM {table} WHERE id = OLD.id AND (state NOT IN ('succeeded', 'cancelled') OR finished_at IS NULL OR finished_at < {lo} OR finished_at >= {hi});

-- name: VIEW_DELETE_TRIGGER
CREATE TRIGGER skiplock_jobs_delete INSTEAD OF DELETE ON skiplock_jobs BEGIN
{statements}
END

-- name: VIEW_DELETE_FROM
DELETE FROM {table} WHERE id = OLD.id;

-- name: DAY_CREATE
CREATE TABLE {table} (
    {columns}
)

-- name: DAY_COLUMN_ID
id INTEGER PRIMARY KEY

-- name: DAY_COLUMN
{column} {kind}

-- name: DAY_FINISHED_INDEX
CREATE INDEX {table}_finished_idx ON {table} (finished_at)

-- name: DAY_RECLAIMED_INDEX
CREATE INDEX {table}_reclaimed_idx ON {table} (reclaimed_at) WHERE reclaimed_at IS NOT NULL

-- name: DAY_MOVE_BACK
INSERT INTO skiplock_jobs_live ({columns}) SELECT {columns} FROM {table} WHERE id = ?

-- name: DAY_DELETE_ONE
DELETE FROM {table} WHERE id = ?

-- name: DAY_COUNT
SELECT count(*) FROM {table}

-- name: DAY_DROP
DROP TABLE {table}

-- name: DAY_PRUNE
DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE finished_at < :before LIMIT :batch)

-- name: FINISH_INTO
INSERT INTO {table} ({columns})
SELECT {values} FROM skiplock_jobs_live
WHERE id = :id AND lane = :lane AND lease_token = :token AND state = 'running'
  AND NOT (:state = 'succeeded' AND unique_succeeded AND unique_key IS NOT NULL)

-- name: FINISH_STATE
:state

-- name: FINISH_ATTEMPT
attempt + :attempt_delta

-- name: FINISH_RUN_AT
coalesce(:run_at, run_at)

-- name: FINISH_FINISHED_AT
:finished_at

-- name: FINISH_NULL
NULL

-- name: FINISH_RUN_S
:run_s

-- name: FINISH_PARKED
CASE WHEN :state = 'waiting' THEN 1 END

-- name: FINISH_ERRORS
CASE WHEN :error IS NULL THEN errors
                  WHEN json_array_length(errors) >= :max_errors
                  THEN json_insert(json_remove(errors, '$[0]'), '$[#]', json(:error))
                  ELSE json_insert(errors, '$[#]', json(:error)) END

-- name: FINISH_RESULT
:result

-- name: FINISH_PROGRESS
coalesce(:progress, progress)
