-- migration: queue claim index

-- A queue-restricted claim walks each of its queues' pending jobs in claim order and stops at
-- its LIMIT, whatever the statistics say; per-queue depth counts read it too. It replaces the
-- (queue, state) index, whose running entries the lease index already covers.
CREATE INDEX skiplock_jobs_queue_pending_idx
    ON {s}.skiplock_jobs (queue, priority DESC, run_at, id) WHERE state = 'pending';
DROP INDEX {s}.skiplock_jobs_live_queue_idx;
