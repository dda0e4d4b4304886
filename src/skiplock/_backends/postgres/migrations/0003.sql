-- migration: operations

ALTER TABLE {s}.skiplock_jobs ADD COLUMN lease_s double precision;
ALTER TABLE {s}.skiplock_jobs ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;
ALTER TABLE {s}.skiplock_jobs ADD COLUMN unique_succeeded boolean NOT NULL DEFAULT false;
ALTER TABLE {s}.skiplock_jobs ADD COLUMN audit jsonb NOT NULL DEFAULT '[]';
-- While a job with a key is live (or succeeded, if it asked), no second one may have it.
CREATE UNIQUE INDEX skiplock_jobs_unique_idx ON {s}.skiplock_jobs (unique_key)
    WHERE unique_key IS NOT NULL
    AND (state IN ('pending', 'running') OR (state = 'succeeded' AND unique_succeeded));
-- Per-queue depth and running counts for bounded and limited queues.
CREATE INDEX skiplock_jobs_live_queue_idx ON {s}.skiplock_jobs (queue, state)
    WHERE state IN ('pending', 'running');
-- Per-queue settings every producer and worker reads: bound, pause, global limits.
CREATE TABLE {s}.skiplock_queues (
    name        text PRIMARY KEY,
    max_depth   integer CHECK (max_depth >= 0),
    max_running integer CHECK (max_running >= 0),
    rate_per_s  double precision CHECK (rate_per_s > 0),
    recent_starts double precision[] NOT NULL DEFAULT '{}',
    paused      boolean NOT NULL DEFAULT false,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- Task names paused by a person (until NULL) or by the breaker (until a time).
CREATE TABLE {s}.skiplock_task_pauses (
    task       text PRIMARY KEY,
    until      timestamptz,
    reason     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
