-- migration: operations

ALTER TABLE skiplock_jobs ADD COLUMN lease_s REAL;
ALTER TABLE skiplock_jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE skiplock_jobs ADD COLUMN unique_succeeded INTEGER NOT NULL DEFAULT 0;
ALTER TABLE skiplock_jobs ADD COLUMN audit TEXT NOT NULL DEFAULT '[]';
-- While a job with a key is live (or succeeded, if it asked), no second one may have it.
CREATE UNIQUE INDEX skiplock_jobs_unique_idx ON skiplock_jobs (unique_key)
    WHERE unique_key IS NOT NULL
    AND (state IN ('pending', 'running') OR (state = 'succeeded' AND unique_succeeded));
-- Per-queue depth and running counts for bounded and limited queues.
CREATE INDEX skiplock_jobs_live_queue_idx ON skiplock_jobs (queue, state)
    WHERE state IN ('pending', 'running');
-- Per-queue settings every producer and worker reads: bound, pause, global limits.
CREATE TABLE skiplock_queues (
    name        TEXT PRIMARY KEY,
    max_depth   INTEGER CHECK (max_depth >= 0),
    max_running INTEGER CHECK (max_running >= 0),
    rate_per_s  REAL CHECK (rate_per_s > 0),
    recent_starts TEXT NOT NULL DEFAULT '[]',
    paused      INTEGER NOT NULL DEFAULT 0,
    updated_at  REAL
);
-- Task names paused by a person (until NULL) or by the breaker (until a time).
CREATE TABLE skiplock_task_pauses (
    task       TEXT PRIMARY KEY,
    until      REAL,
    reason     TEXT NOT NULL,
    created_at REAL
);
