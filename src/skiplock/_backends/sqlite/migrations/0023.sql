-- migration: signal senders, kept results

ALTER TABLE skiplock_signals ADD COLUMN sender TEXT;
ALTER TABLE skiplock_signals ADD COLUMN taken INTEGER NOT NULL DEFAULT 1;
CREATE INDEX IF NOT EXISTS skiplock_signals_untaken_idx ON skiplock_signals (job_id)
    WHERE kind = 'signal' AND taken = 0;
CREATE TABLE IF NOT EXISTS skiplock_parent_results (
    parent_id INTEGER PRIMARY KEY,
    result    TEXT
)
