-- name: JOB_PRUNE
-- Delete one bounded batch ($4 rows) of finished rows past their retention ($1, $2 seconds
-- of the database clock); SKIP LOCKED keeps concurrent pruners off each other's rows and
-- every lock short, and never waits, so it cannot deadlock.
DELETE FROM {s}.skiplock_jobs
WHERE state IN ('succeeded', 'cancelled', 'dead') AND id IN (
    SELECT id FROM {s}.skiplock_jobs
    WHERE (state IN ('succeeded', 'cancelled')
           AND finished_at < coalesce($3::timestamptz, now()) - $1::float8 * interval '1 second')
       OR (state = 'dead'
           AND finished_at < coalesce($3::timestamptz, now()) - $2::float8 * interval '1 second')
    LIMIT $4
    FOR UPDATE SKIP LOCKED
)

-- name: JOB_PRUNE_PREVIEW
-- What JOB_PRUNE would delete now, by state: the same condition, so a dry run counts
-- exactly the rows the real run's rule takes.
SELECT state, count(*) AS n FROM {s}.skiplock_jobs
    WHERE (state IN ('succeeded', 'cancelled')
           AND finished_at < coalesce($3::timestamptz, now()) - $1::float8 * interval '1 second')
       OR (state = 'dead'
           AND finished_at < coalesce($3::timestamptz, now()) - $2::float8 * interval '1 second')
GROUP BY state
