-- migration: signal senders, kept results

-- Signals know who sent them (wait_for(..., with_sender=True)) and whether a wait took them:
-- the signals of a job that no wait took yet are bounded (max_signals_kept), counted through
-- the partial index; the rows written before count as taken. A parent's result is kept once
-- for all its children's edges (skiplock_parent_results), not copied onto every edge (a
-- 253 kB result to 1,000 children was 271 MB of WAL). postgres_workflow_sql.py says more.
ALTER TABLE {s}.skiplock_signals ADD COLUMN sender text;
ALTER TABLE {s}.skiplock_signals ADD COLUMN taken boolean NOT NULL DEFAULT true;
ALTER TABLE {s}.skiplock_signals ALTER COLUMN taken SET DEFAULT false;
CREATE INDEX skiplock_signals_untaken_idx ON {s}.skiplock_signals (job_id)
    WHERE kind = 'signal' AND NOT taken;
CREATE TABLE {s}.skiplock_parent_results (
    parent_id bigint PRIMARY KEY,
    result    jsonb
);
