-- migration: lanes

-- Every job carries a lane (docs/design.md "Every job carries a lane"): 'default' in a
-- database of one lane, as a SQLite file always is; its statements name the lane by equality
-- all the same, as PostgreSQL's do. The claim and lease indexes lead with it (replaced, not
-- added to); the day tables and the view take the column after this (storage/history.py).
ALTER TABLE skiplock_jobs_live ADD COLUMN lane TEXT NOT NULL DEFAULT 'default';
DROP INDEX skiplock_jobs_pending_idx;
CREATE INDEX skiplock_jobs_pending_idx
    ON skiplock_jobs_live (lane, (concurrency_key IS NOT NULL), priority DESC, run_at, id)
    WHERE state = 'pending';
DROP INDEX skiplock_jobs_queue_pending_idx;
CREATE INDEX skiplock_jobs_queue_pending_idx
    ON skiplock_jobs_live (lane, queue, (concurrency_key IS NOT NULL), priority DESC, run_at, id)
    WHERE state = 'pending';
DROP INDEX skiplock_jobs_keyed_walk_idx;
CREATE INDEX skiplock_jobs_keyed_walk_idx
    ON skiplock_jobs_live (lane, queue, concurrency_key, priority DESC, run_at, id)
    WHERE state = 'pending' AND concurrency_key IS NOT NULL;
DROP INDEX skiplock_jobs_lease_idx;
CREATE INDEX skiplock_jobs_lease_idx ON skiplock_jobs_live (lane, lease_expires_at)
    WHERE state = 'running';
