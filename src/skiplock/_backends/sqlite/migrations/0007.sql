-- migration: health numbers and worker registry

-- What the health numbers need of a job row: when its last claim found it ready, how long
-- its last attempt ran by its worker's clock, how often its lease expired and when last
-- (no semicolons in comments: migrate splits on them).
ALTER TABLE skiplock_jobs ADD COLUMN ready_at REAL;
ALTER TABLE skiplock_jobs ADD COLUMN run_s REAL;
ALTER TABLE skiplock_jobs ADD COLUMN reclaims INTEGER NOT NULL DEFAULT 0;
ALTER TABLE skiplock_jobs ADD COLUMN reclaimed_at REAL;
CREATE INDEX skiplock_jobs_reclaimed_idx ON skiplock_jobs (reclaimed_at)
    WHERE reclaimed_at IS NOT NULL;
CREATE TABLE skiplock_workers (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    queues        TEXT,
    concurrency   INTEGER NOT NULL,
    running       INTEGER NOT NULL DEFAULT 0,
    processed     INTEGER NOT NULL DEFAULT 0,
    started_at    REAL NOT NULL,
    heartbeat_at  REAL NOT NULL,
    last_claim_at REAL
)
