"""PostgreSQL's unique-key windows and replacing enqueues: migration 14 and the statements
``flows.replace_held`` steps through (docs/design.md, "Unique keys").

Keys live in ``skiplock_keys`` (postgres_storage_sql.py): a row for every key a live job
holds, taken and released by triggers. A window (``unique_for``) makes a succeeded job keep
its row until ``held_until`` (its ``unique_until``); a passed window holds nothing, and the
next enqueue of the key takes the row over in the insert's own statement, so the row never
needs a sweep. Everything that reads a holder reads ``held_until`` with it.
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

HELD = "(k.held_until IS NULL OR k.held_until > {now})"
"""Whether key row ``k`` holds its key at ``{now}`` (a window not passed yet)."""

JOB_HOLDER_OF = (
    """
-- The job holding unique key $1 at $2 (the database's now() when NULL), if any.
SELECT k.job_id FROM {s}.skiplock_keys k WHERE k.unique_key = $1 AND """
    + HELD.format(now="coalesce($2::timestamptz, now())")
    + "\n"
)

JOB_REPLACE_PENDING = (
    """
-- on_conflict="replace": the pending job holding key $2 takes this enqueue's arguments, run
-- time and payload version (run at $5 or $6 seconds after $7, the database's now() if NULL);
-- the job is $1, or (NULL) the key's holder read here; nothing when it is not pending (it
-- started or finished meanwhile, or no job holds the key). A run time moved earlier wakes
-- its queue.
WITH r AS (
    UPDATE {s}.skiplock_jobs
    SET args = $3::jsonb, kwargs = $4::jsonb, payload_version = $8::int,
        run_at = coalesce(to_timestamp($5::float8), coalesce($7::timestamptz, now())
                          + make_interval(secs => coalesce($6::float8, 0)))
    WHERE id = coalesce($1::bigint, (SELECT k.job_id FROM {s}.skiplock_keys k
                                     WHERE k.unique_key = $2 AND """
    + HELD.format(now="coalesce($7::timestamptz, now())")
    + """))
      AND state = 'pending' AND unique_key = $2
    RETURNING id, queue
), woken AS (
    SELECT pg_notify($9, queue) FROM r
)
SELECT id FROM r WHERE (SELECT count(*) FROM woken) >= 0
"""
)

JOB_RELEASE_RUNNING_KEY = """
-- A debounce gathering enqueues while job $1 runs with key $2: the running job gives the key
-- up (its unique_key cleared: it read older arguments), so the enqueue writes a new job.
WITH r AS (
    UPDATE {s}.skiplock_jobs SET unique_key = NULL
    WHERE id = $1 AND state = 'running' AND unique_key = $2
    RETURNING id
)
DELETE FROM {s}.skiplock_keys k USING r WHERE k.unique_key = $2 AND k.job_id = r.id
RETURNING k.job_id
"""
