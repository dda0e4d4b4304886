-- migration: initial

CREATE TABLE {s}.skiplock_jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue            text NOT NULL,
    task             text NOT NULL,
    args             jsonb NOT NULL DEFAULT '[]',
    kwargs           jsonb NOT NULL DEFAULT '{}',
    state            text NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'running', 'succeeded', 'cancelled', 'dead')),
    priority         integer NOT NULL DEFAULT 0,
    attempt          integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL CHECK (max_attempts >= 1),
    timeout          double precision,
    run_at           timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    attempted_at     timestamptz,
    finished_at      timestamptz,
    locked_by        text,
    lease_token      text,
    lease_expires_at timestamptz,
    errors           jsonb NOT NULL DEFAULT '[]',
    unique_key       text,
    correlation_id   text
);
-- Claims read only this index: finished rows kept for history never slow the hot path.
CREATE INDEX skiplock_jobs_pending_idx ON {s}.skiplock_jobs (priority DESC, run_at, id)
    WHERE state = 'pending';
CREATE INDEX skiplock_jobs_lease_idx ON {s}.skiplock_jobs (lease_expires_at)
    WHERE state = 'running';
CREATE INDEX skiplock_jobs_finished_idx ON {s}.skiplock_jobs (finished_at)
    WHERE state IN ('succeeded', 'cancelled', 'dead');
