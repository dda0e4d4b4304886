"""PostgreSQL's unique-key windows and replacing enqueues: migration 14 and the statements
``flows.replace_held`` steps through (docs/design.md, "Unique keys").

Keys live in ``skiplock_keys`` (postgres_storage_sql.py): a row for every key a live job
(or one parked on a signal: migration 24) holds, taken and released by triggers. A window
(``unique_for``) makes a succeeded job keep its row until ``held_until`` (its
``unique_until``); a passed window holds nothing, and the next enqueue of the key takes the
row over in the insert's own statement, so the row never needs a sweep. Everything that reads
a holder reads ``held_until`` with it.
"""

from __future__ import annotations

MIGRATION_UNIQUE_WINDOWS = """
-- unique_until: a succeeded job keeps its key until then (unique_for=); held_until: the
-- same on the key's row (NULL: held while the row exists, as before).
ALTER TABLE {s}.skiplock_jobs ADD COLUMN unique_until timestamptz;
ALTER TABLE {s}.skiplock_keys ADD COLUMN held_until timestamptz;

-- A job entering history with its key keeps it until its window closes (NULL: until the row
-- goes); one entering the live partition holds it while it stays there.
CREATE OR REPLACE FUNCTION {s}.skiplock_key_take() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM {s}.skiplock_keys WHERE unique_key = NEW.unique_key AND job_id = NEW.id;
    IF NOT FOUND THEN
        INSERT INTO {s}.skiplock_keys (unique_key, job_id, held_until)
        VALUES (NEW.unique_key, NEW.id,
                CASE WHEN NEW.state = 'succeeded' THEN NEW.unique_until END);
    END IF;
    RETURN NULL;
END
$$;
"""

MIGRATION_UNIQUE_SCOPES = """
-- A unique key is unique within a key space (docs/design.md, "Unique keys: scopes"): the
-- task's own (unique_scope holds the task's name) or the shared one (the empty text,
-- unique_scope="shared"). A job row from before holds NULL: its task's own (the trigger
-- reads it so, should a person retry it), so no job row is rewritten. The keys held before
-- were one space for every task: they become their tasks' own, the rule from now on, which
-- none of them can break (they were unique across all tasks).
ALTER TABLE {s}.skiplock_jobs ADD COLUMN unique_scope text;
ALTER TABLE {s}.skiplock_keys ADD COLUMN unique_scope text;
UPDATE {s}.skiplock_keys k SET unique_scope = coalesce(j.unique_scope, j.task)
FROM {s}.skiplock_jobs j WHERE j.id = k.job_id;
DELETE FROM {s}.skiplock_keys WHERE unique_scope IS NULL;  -- no job: it held nothing
ALTER TABLE {s}.skiplock_keys ALTER COLUMN unique_scope SET NOT NULL;
ALTER TABLE {s}.skiplock_keys DROP CONSTRAINT skiplock_jobs_unique_idx;
ALTER TABLE {s}.skiplock_keys
    ADD CONSTRAINT skiplock_jobs_unique_idx PRIMARY KEY (unique_key, unique_scope);

CREATE OR REPLACE FUNCTION {s}.skiplock_key_take() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM {s}.skiplock_keys WHERE unique_key = NEW.unique_key AND job_id = NEW.id;
    IF NOT FOUND THEN
        INSERT INTO {s}.skiplock_keys (unique_key, unique_scope, job_id, held_until)
        VALUES (NEW.unique_key, coalesce(NEW.unique_scope, NEW.task), NEW.id,
                CASE WHEN NEW.state = 'succeeded' THEN NEW.unique_until END);
    END IF;
    RETURN NULL;
END
$$;
"""

MIGRATION_PARKED_KEYS = """
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
"""

SCOPE_OF = "coalesce({j}.unique_scope, {j}.task)"
"""The key space of job row ``{j}``'s key (NULL on a row from before migration 19: the
task's own)."""

HELD = "(k.held_until IS NULL OR k.held_until > {now})"
"""Whether key row ``k`` holds its key at ``{now}`` (a window not passed yet)."""

JOB_HOLDER_OF = (
    """
-- The job holding unique key $1 in key space $3 at $2 (the database's now() when NULL), if
-- any.
SELECT k.job_id FROM {s}.skiplock_keys k
WHERE k.unique_key = $1 AND k.unique_scope = $3 AND """
    + HELD.format(now="coalesce($2::timestamptz, now())")
    + "\n"
)

JOB_REPLACE_PENDING = (
    """
-- on_conflict="replace": the pending job of task $11 holding key $2 in key space $10 takes
-- this enqueue's arguments, run time and payload version (run at $5 or $6 seconds after $7,
-- the database's now() if NULL); the job is $1, or (NULL) the key's holder read here;
-- nothing when it is not pending (it started or finished meanwhile, or no job holds the
-- key) or is another task's (the shared key space: its function must not run with these
-- arguments). A run time moved earlier wakes its queue.
WITH r AS (
    UPDATE {s}.skiplock_jobs
    SET args = $3::jsonb, kwargs = $4::jsonb, payload_version = $8::int,
        run_at = coalesce(to_timestamp($5::float8), coalesce($7::timestamptz, now())
                          + make_interval(secs => coalesce($6::float8, 0)))
    WHERE id = coalesce($1::bigint, (SELECT k.job_id FROM {s}.skiplock_keys k
                                     WHERE k.unique_key = $2 AND k.unique_scope = $10 AND """
    + HELD.format(now="coalesce($7::timestamptz, now())")
    + """))
      AND state = 'pending' AND unique_key = $2 AND task = $11
      AND """
    + SCOPE_OF.format(j="skiplock_jobs")
    + """ = $10
    RETURNING id, queue
), woken AS (
    SELECT pg_notify($9, queue) FROM r
)
SELECT id FROM r WHERE (SELECT count(*) FROM woken) >= 0
"""
)

JOB_RELEASE_RUNNING_KEY = (
    """
-- A debounce of task $4 gathering enqueues while its job $1 runs with key $2 in key space
-- $3 (or is parked on a signal, part way through its run): the job gives the key up (its
-- unique_key cleared: it read older arguments), so the enqueue writes a new job. Another
-- task's running or parked job keeps its key.
WITH r AS (
    UPDATE {s}.skiplock_jobs SET unique_key = NULL, unique_scope = NULL
    WHERE id = $1 AND unique_key = $2 AND task = $4
      AND (state = 'running'
           OR (state = 'waiting' AND EXISTS (SELECT 1 FROM {s}.skiplock_waits w
                                             WHERE w.job_id = $1 AND w.signal IS NOT NULL)))
      AND """
    + SCOPE_OF.format(j="skiplock_jobs")
    + """ = $3
    RETURNING id
)
DELETE FROM {s}.skiplock_keys k USING r WHERE k.unique_key = $2 AND k.job_id = r.id
RETURNING k.job_id
"""
)
