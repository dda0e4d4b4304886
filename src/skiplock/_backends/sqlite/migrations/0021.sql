-- migration: unreleased waits

CREATE TABLE IF NOT EXISTS skiplock_unreleased (
    job_id       INTEGER PRIMARY KEY,
    pass_results TEXT CHECK (pass_results IN ('previous', 'all', 'batch')),
    batch_id     INTEGER,
    ended_at     REAL
)
