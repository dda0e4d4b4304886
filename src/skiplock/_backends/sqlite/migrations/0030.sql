-- migration: job logs, worker children

-- A job's own log (docs/guides/job-logs.md): the log records an attempt of a task with
-- job_log=True emitted while it ran, one row an attempt, written by the worker just before
-- the attempt's outcome; a table of its own beside the job tables (the live table and the
-- history days). lines: a JSON array of [at, level, logger, message]; cut_lines, cut_bytes:
-- the head of the log dropped to keep the tail within the job's cap. Pruned with the job:
-- the prune deletes the logs whose job is gone.
CREATE TABLE skiplock_job_logs (
    job_id     INTEGER NOT NULL,
    attempt    INTEGER NOT NULL,
    lines      TEXT NOT NULL,
    cut_lines  INTEGER NOT NULL DEFAULT 0,
    cut_bytes  INTEGER NOT NULL DEFAULT 0,
    written_at REAL NOT NULL,
    PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
-- The process executor's children of each worker (their pids and jobs), as JSON text.
ALTER TABLE skiplock_workers ADD COLUMN children TEXT;
