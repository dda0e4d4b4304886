-- migration: job logs, worker children

-- A job's own log (docs/guides/job-logs.md): the log records an attempt of a task with
-- job_log=True emitted while it ran, one row an attempt, written by the worker just before
-- the attempt's outcome. A plain table of its own, never the job table: the job table is
-- partitioned into live generations that rotate, and an opt-in, bounded text a few jobs keep
-- has no place in every claim's rows. lines: a JSON array of [at, level, logger, message];
-- cut_lines, cut_bytes: the head of the log dropped to keep the tail within the job's cap.
-- Pruned with the job: the prune deletes the logs whose job is gone.
CREATE TABLE {s}.skiplock_job_logs (
    job_id     bigint NOT NULL,
    attempt    integer NOT NULL,
    lines      text NOT NULL,
    cut_lines  integer NOT NULL DEFAULT 0,
    cut_bytes  bigint NOT NULL DEFAULT 0,
    written_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, attempt)
);
-- The process executor's children of each worker (their pids and jobs), as JSON text.
ALTER TABLE {s}.skiplock_workers ADD COLUMN children text;
