-- migration: queue claim index

-- A queue-restricted claim walks each of its queues' pending jobs in claim order and stops at
-- its LIMIT, and per-queue depth counts read it too. It replaces the (queue, state) index,
-- whose running entries the lease index already covers (no semicolons: migrate splits on them).
CREATE INDEX skiplock_jobs_queue_pending_idx
    ON skiplock_jobs (queue, priority DESC, run_at, id) WHERE state = 'pending';
DROP INDEX skiplock_jobs_live_queue_idx;
