-- migration: key turns

-- Turns in the database (postgres_key_turns_sql.py says why): each key's pass, advanced at
-- claim by TURN_UNITS / key_weight a job taken. A row whose key has no live job is pruned
-- by the upkeep (KEY_TURNS_PRUNE).
CREATE TABLE IF NOT EXISTS skiplock_key_turns (
    concurrency_key TEXT PRIMARY KEY,
    pass            INTEGER NOT NULL
) WITHOUT ROWID;
-- An ordered job parked on a signal holds its key: the parked jobs of ordered keys, by key.
CREATE INDEX IF NOT EXISTS skiplock_jobs_parked_ordered_idx
    ON skiplock_jobs_live (concurrency_key, id) WHERE state = 'waiting' AND key_order IS NOT NULL
