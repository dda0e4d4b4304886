-- migration: initial

CREATE TABLE skiplock_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    queue            TEXT NOT NULL,
    task             TEXT NOT NULL,
    args             TEXT NOT NULL DEFAULT '[]',
    kwargs           TEXT NOT NULL DEFAULT '{}',
    state            TEXT NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'running', 'succeeded', 'cancelled', 'dead')),
    priority         INTEGER NOT NULL DEFAULT 0,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    timeout          REAL,
    run_at           REAL NOT NULL,
    created_at       REAL NOT NULL,
    attempted_at     REAL,
    finished_at      REAL,
    locked_by        TEXT,
    lease_token      TEXT,
    lease_expires_at REAL,
    errors           TEXT NOT NULL DEFAULT '[]',
    unique_key       TEXT,
    correlation_id   TEXT
);
-- Claims read only this index: finished rows kept for history never slow the hot path.
CREATE INDEX skiplock_jobs_pending_idx ON skiplock_jobs (priority DESC, run_at, id)
    WHERE state = 'pending';
CREATE INDEX skiplock_jobs_lease_idx ON skiplock_jobs (lease_expires_at)
    WHERE state = 'running';
CREATE INDEX skiplock_jobs_finished_idx ON skiplock_jobs (finished_at)
    WHERE state IN ('succeeded', 'cancelled', 'dead');
