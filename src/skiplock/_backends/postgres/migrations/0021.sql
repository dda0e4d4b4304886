-- migration: unreleased waits

-- Jobs that ended (cancelled, or buried for the size of their parents' results) while they
-- waited for their parents: what their release would have given them (their wait row's
-- pass_results and batch), so that a retry waits for the parents again and is released with
-- their results, never run without them. A row goes with its retry, or with its job.
CREATE TABLE {s}.skiplock_unreleased (
    job_id       bigint PRIMARY KEY,
    pass_results text CHECK (pass_results IN ('previous', 'all', 'batch')),
    batch_id     bigint,
    ended_at     timestamptz NOT NULL DEFAULT now()
);
