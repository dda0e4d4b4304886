-- migration: key turns end when idle

-- A key's turns end with its last live job (PostgreSQL's migration 25 says why): when a
-- keyed job stops being pending or running (finished, dead, cancelled, parked on a signal)
-- or a live one is deleted, and its key has no pending or running job left, the key's turn
-- row goes at once, as the upkeep's prune would have taken it later.
CREATE TRIGGER skiplock_key_turns_end_state AFTER UPDATE OF state ON skiplock_jobs_live
    WHEN NEW.concurrency_key IS NOT NULL AND OLD.state IN ('pending', 'running')
         AND NEW.state NOT IN ('pending', 'running')
BEGIN
    DELETE FROM skiplock_key_turns WHERE concurrency_key = NEW.concurrency_key
        AND NOT EXISTS (SELECT 1 FROM skiplock_jobs_live j
                        WHERE j.state IN ('pending', 'running') AND j.concurrency_key IS NOT NULL
                          AND j.concurrency_key = NEW.concurrency_key);
END;
CREATE TRIGGER skiplock_key_turns_end_delete AFTER DELETE ON skiplock_jobs_live
    WHEN OLD.concurrency_key IS NOT NULL AND OLD.state IN ('pending', 'running')
BEGIN
    DELETE FROM skiplock_key_turns WHERE concurrency_key = OLD.concurrency_key
        AND NOT EXISTS (SELECT 1 FROM skiplock_jobs_live j
                        WHERE j.state IN ('pending', 'running') AND j.concurrency_key IS NOT NULL
                          AND j.concurrency_key = OLD.concurrency_key);
END
