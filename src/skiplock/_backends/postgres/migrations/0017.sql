-- migration: workflows

-- Workflows (postgres_workflow_sql.py). The state CHECK is replaced: PostgreSQL checks the
-- new one against every partition once (a read of history, at the upgrade only).
ALTER TABLE {s}.skiplock_jobs DROP CONSTRAINT skiplock_jobs_state_check;
ALTER TABLE {s}.skiplock_jobs ADD CONSTRAINT skiplock_jobs_state_check
    CHECK (state IN ('pending', 'running', 'succeeded', 'cancelled', 'dead', 'waiting'));
CREATE TABLE {s}.skiplock_jobs_waiting PARTITION OF {s}.skiplock_jobs
    (PRIMARY KEY (id)) FOR VALUES IN ('waiting');
CREATE INDEX skiplock_jobs_waiting_run_at_idx ON {s}.skiplock_jobs_waiting (run_at);
CREATE TABLE {s}.skiplock_waits (
    job_id       bigint PRIMARY KEY,
    parents_left integer NOT NULL DEFAULT 0 CHECK (parents_left >= 0),
    pass_results text CHECK (pass_results IN ('previous', 'all', 'batch')),
    signal       text,
    batch_id     bigint,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX skiplock_waits_signal_idx ON {s}.skiplock_waits (job_id) WHERE signal IS NOT NULL;
CREATE TABLE {s}.skiplock_deps (
    child_id      bigint NOT NULL,
    parent_id     bigint NOT NULL,
    position      integer NOT NULL,
    on_failure    text NOT NULL CHECK (on_failure IN ('cancel', 'run', 'wait')),
    parent_state  text,
    parent_result jsonb,
    resolved_at   timestamptz,
    PRIMARY KEY (child_id, parent_id)
);
-- (parent_id, child_id): whichever of the two a plan takes for an edge, it probes the one row
CREATE INDEX skiplock_deps_parent_idx ON {s}.skiplock_deps (parent_id, child_id);
CREATE INDEX skiplock_deps_open_idx ON {s}.skiplock_deps (parent_id, child_id)
    WHERE parent_state IS NULL;
CREATE TABLE {s}.skiplock_batches (
    id          bigserial PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now(),
    closed_at   timestamptz,
    on_success  bigint,
    on_complete bigint
);
-- a callback finds its batch (a job's page, ``job show``) by these
CREATE INDEX skiplock_batches_on_success_idx ON {s}.skiplock_batches (on_success);
CREATE INDEX skiplock_batches_on_complete_idx ON {s}.skiplock_batches (on_complete);
CREATE TABLE {s}.skiplock_batch_jobs (
    batch_id bigint NOT NULL,
    job_id   bigint NOT NULL,
    PRIMARY KEY (batch_id, job_id)
);
CREATE INDEX skiplock_batch_jobs_job_idx ON {s}.skiplock_batch_jobs (job_id);
CREATE TABLE {s}.skiplock_steps (
    job_id  bigint NOT NULL,
    name    text NOT NULL,
    result  jsonb,
    done_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, name)
);
CREATE TABLE {s}.skiplock_signals (
    job_id  bigint NOT NULL,
    name    text NOT NULL,
    kind    text NOT NULL CHECK (kind IN ('signal', 'timeout')),
    payload jsonb,
    at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, name)
);
