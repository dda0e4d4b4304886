-- migration: workflows

CREATE INDEX IF NOT EXISTS skiplock_jobs_waiting_idx ON skiplock_jobs_live (run_at)
    WHERE state = 'waiting';
CREATE TABLE IF NOT EXISTS skiplock_waits (
    job_id       INTEGER PRIMARY KEY,
    parents_left INTEGER NOT NULL DEFAULT 0 CHECK (parents_left >= 0),
    pass_results TEXT CHECK (pass_results IN ('previous', 'all', 'batch')),
    signal       TEXT,
    batch_id     INTEGER,
    created_at   REAL
);
CREATE TABLE IF NOT EXISTS skiplock_deps (
    child_id      INTEGER NOT NULL,
    parent_id     INTEGER NOT NULL,
    position      INTEGER NOT NULL,
    on_failure    TEXT NOT NULL CHECK (on_failure IN ('cancel', 'run', 'wait')),
    parent_state  TEXT,
    parent_result TEXT,
    resolved_at   REAL,
    PRIMARY KEY (child_id, parent_id)
);
CREATE INDEX IF NOT EXISTS skiplock_deps_parent_idx ON skiplock_deps (parent_id, child_id);
CREATE INDEX IF NOT EXISTS skiplock_deps_open_idx ON skiplock_deps (parent_id, child_id)
    WHERE parent_state IS NULL;
CREATE TABLE IF NOT EXISTS skiplock_batches (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at  REAL NOT NULL,
    closed_at   REAL,
    on_success  INTEGER,
    on_complete INTEGER
);
CREATE INDEX IF NOT EXISTS skiplock_batches_on_success_idx ON skiplock_batches (on_success);
CREATE INDEX IF NOT EXISTS skiplock_batches_on_complete_idx ON skiplock_batches (on_complete);
CREATE TABLE IF NOT EXISTS skiplock_batch_jobs (
    batch_id INTEGER NOT NULL,
    job_id   INTEGER NOT NULL,
    PRIMARY KEY (batch_id, job_id)
);
CREATE INDEX IF NOT EXISTS skiplock_batch_jobs_job_idx ON skiplock_batch_jobs (job_id);
CREATE TABLE IF NOT EXISTS skiplock_steps (
    job_id  INTEGER NOT NULL,
    name    TEXT NOT NULL,
    result  TEXT,
    done_at REAL,
    PRIMARY KEY (job_id, name)
);
CREATE TABLE IF NOT EXISTS skiplock_signals (
    job_id  INTEGER NOT NULL,
    name    TEXT NOT NULL,
    kind    TEXT NOT NULL CHECK (kind IN ('signal', 'timeout')),
    payload TEXT,
    at      REAL,
    PRIMARY KEY (job_id, name)
)
