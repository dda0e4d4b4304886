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
