-- migration: parked jobs keep their keys

-- A job parked on a signal (wait_for) keeps its unique key, as a running one does
-- (docs/design.md, "Unique keys: a parked job keeps its key"): triggers on the waiting
-- partition take the key of a row that enters it parked (its wait row, written before the
-- park, names a signal) and release the key of any row that leaves it. A job waiting for its
-- parents holds none, as before. A park, a resume, a cancel move the row between partitions
-- (a delete, then an insert: the AFTER DELETE trigger's release comes first, then the take).
-- No park or resume runs while this does.
LOCK TABLE {s}.skiplock_jobs_waiting IN SHARE ROW EXCLUSIVE MODE;
CREATE FUNCTION {s}.skiplock_key_take_parked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM {s}.skiplock_waits WHERE job_id = NEW.id AND signal IS NOT NULL;
    IF FOUND THEN
        PERFORM 1 FROM {s}.skiplock_keys WHERE unique_key = NEW.unique_key AND job_id = NEW.id;
        IF NOT FOUND THEN
            INSERT INTO {s}.skiplock_keys (unique_key, unique_scope, job_id)
            VALUES (NEW.unique_key, coalesce(NEW.unique_scope, NEW.task), NEW.id);
        END IF;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER skiplock_waiting_key_take AFTER INSERT ON {s}.skiplock_jobs_waiting
    FOR EACH ROW WHEN (NEW.unique_key IS NOT NULL)
    EXECUTE FUNCTION {s}.skiplock_key_take_parked();
CREATE TRIGGER skiplock_waiting_key_release AFTER DELETE ON {s}.skiplock_jobs_waiting
    FOR EACH ROW WHEN (OLD.unique_key IS NOT NULL)
    EXECUTE FUNCTION {s}.skiplock_key_release();

-- The jobs parked before this had given their keys up. Each takes its key back (the lowest id
-- of a key's parked jobs; a window that has passed holds nothing and is taken over) unless
-- another job holds it now: then it gives it up for good (its key cleared), so it still
-- resumes.
INSERT INTO {s}.skiplock_keys AS k (unique_key, unique_scope, job_id)
SELECT DISTINCT ON (j.unique_key, coalesce(j.unique_scope, j.task))
       j.unique_key, coalesce(j.unique_scope, j.task), j.id
FROM {s}.skiplock_jobs_waiting j JOIN {s}.skiplock_waits w ON w.job_id = j.id
WHERE j.unique_key IS NOT NULL AND w.signal IS NOT NULL
ORDER BY j.unique_key, coalesce(j.unique_scope, j.task), j.id
ON CONFLICT (unique_key, unique_scope) DO UPDATE
SET job_id = EXCLUDED.job_id, held_until = NULL
WHERE k.held_until <= now();
UPDATE {s}.skiplock_jobs_waiting j SET unique_key = NULL, unique_scope = NULL
FROM {s}.skiplock_waits w
WHERE w.job_id = j.id AND w.signal IS NOT NULL AND j.unique_key IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_keys k
                  WHERE k.job_id = j.id AND k.unique_key = j.unique_key);
