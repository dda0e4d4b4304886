-- migration: parked jobs keep their keys

-- A job parked on a signal (wait_for) keeps its unique key, as a running one does
-- (docs/design.md, "Unique keys: a parked job keeps its key"): the unique index counts a
-- waiting row with parked set (by the completion that parks it) as its key's holder. A job
-- waiting for its parents still holds none. The day tables gain the column after the
-- migrations (sqlite_history.follow_live), and no semicolon may stand in a comment: migrate
-- splits on them.
ALTER TABLE skiplock_jobs_live ADD COLUMN parked INTEGER;
UPDATE skiplock_jobs_live SET parked = 1
WHERE state = 'waiting' AND id IN (SELECT job_id FROM skiplock_waits WHERE signal IS NOT NULL);
-- A job parked before this had given its key up: where another job holds it now (or a parked
-- job of a lower id takes it back here), it gives it up for good (its key cleared), so it
-- still resumes. The others hold theirs again.
UPDATE skiplock_jobs_live SET unique_key = NULL, unique_scope = NULL
WHERE state = 'waiting' AND parked AND unique_key IS NOT NULL AND EXISTS (
    SELECT 1 FROM skiplock_jobs_live o
    WHERE o.unique_key = skiplock_jobs_live.unique_key
      AND o.unique_scope = skiplock_jobs_live.unique_scope AND o.id <> skiplock_jobs_live.id
      AND (o.state IN ('pending', 'running') OR (o.state = 'succeeded' AND o.unique_succeeded)
           OR (o.state = 'waiting' AND o.parked AND o.id < skiplock_jobs_live.id)));
DROP INDEX skiplock_jobs_unique_idx;
CREATE UNIQUE INDEX skiplock_jobs_unique_idx ON skiplock_jobs_live (unique_key, unique_scope)
    WHERE unique_key IS NOT NULL AND (state IN ('pending', 'running') OR (state = 'waiting' AND parked) OR (state = 'succeeded' AND unique_succeeded))
