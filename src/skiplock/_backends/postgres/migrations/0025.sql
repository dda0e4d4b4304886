-- migration: key turns end when idle

-- A key's turns end with its last live job (postgres_key_turns_sql.py, docs/design.md "Turns
-- in the database"): when a job leaves the keyed segment (finished, dead, cancelled, parked
-- on a signal, deleted) and its key has no pending or running job left, the key's turn row
-- goes at once, as the upkeep's prune would have taken it later. A key back with work after
-- it had none then starts as a new key does, whether or not the prune ran meanwhile: it
-- cannot keep the turns it was behind (nor the ones it was ahead) from before. A row a claim
-- holds this instant is left (SKIP LOCKED: the key has work again, and this never waits).
CREATE FUNCTION {s}.skiplock_key_turns_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {s}.skiplock_key_turns WHERE concurrency_key = (
        SELECT t.concurrency_key FROM {s}.skiplock_key_turns t
        WHERE t.concurrency_key = OLD.concurrency_key
          AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs_live_keyed j
                          WHERE j.concurrency_key = OLD.concurrency_key
                            AND j.state IN ('pending', 'running'))
        FOR UPDATE SKIP LOCKED);
    RETURN NULL;
END
$$;
CREATE TRIGGER skiplock_key_turns_end AFTER DELETE ON {s}.skiplock_jobs_live_keyed
    FOR EACH ROW WHEN (OLD.state IN ('pending', 'running'))
    EXECUTE FUNCTION {s}.skiplock_key_turns_end();
