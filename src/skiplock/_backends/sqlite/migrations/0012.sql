-- migration: concurrency keys

-- Concurrency keys (sqlite_keys.py, docs/design.md "Concurrency keys"). The day tables gain
-- the columns and the view is rebuilt after the migrations (sqlite_history.follow_live).
ALTER TABLE skiplock_jobs_live ADD COLUMN concurrency_key TEXT;
ALTER TABLE skiplock_jobs_live ADD COLUMN key_limit INTEGER CHECK (key_limit >= 1);
ALTER TABLE skiplock_jobs_live ADD COLUMN key_order TEXT CHECK (key_order IN ('block', 'skip'));
-- The ordinary claims walk unkeyed jobs only (the leading term, = 0), every pending count
-- still reads these (the predicate is unchanged), and the keyed claim has its own walk
-- (no semicolons in comments: migrate splits on them).
DROP INDEX skiplock_jobs_pending_idx;
CREATE INDEX skiplock_jobs_pending_idx
    ON skiplock_jobs_live ((concurrency_key IS NOT NULL), priority DESC, run_at, id)
    WHERE state = 'pending';
DROP INDEX skiplock_jobs_queue_pending_idx;
CREATE INDEX skiplock_jobs_queue_pending_idx
    ON skiplock_jobs_live (queue, (concurrency_key IS NOT NULL), priority DESC, run_at, id)
    WHERE state = 'pending';
CREATE INDEX skiplock_jobs_keyed_walk_idx
    ON skiplock_jobs_live (queue, concurrency_key, priority DESC, run_at, id)
    WHERE state = 'pending' AND concurrency_key IS NOT NULL;
CREATE INDEX skiplock_jobs_keyed_running_idx ON skiplock_jobs_live (concurrency_key)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;
-- An ordered key's head (its live job of the lowest id), and the dead jobs that hold their
-- ordered keys.
CREATE INDEX skiplock_jobs_keyed_head_idx ON skiplock_jobs_live (concurrency_key, id)
    WHERE state IN ('pending', 'running') AND concurrency_key IS NOT NULL;
CREATE INDEX skiplock_jobs_dead_blocking_idx ON skiplock_jobs_live (concurrency_key, id)
    WHERE state = 'dead' AND key_order = 'block'
