-- name: JOB_BUSIEST_KEYS
-- The $4 keys with the most running jobs, then the most ready (at $1, NULL: now), of queue
-- $2 and task $3 (NULL: any): each key's live jobs counted, the keyed segment's rows alone
-- (none of history, no unkeyed job).
SELECT concurrency_key AS key,
       count(*) FILTER (WHERE state = 'running') AS running,
       count(*) FILTER (WHERE state = 'pending'
                        AND run_at <= coalesce($1::timestamptz, now())) AS ready,
       count(*) FILTER (WHERE state = 'pending') AS pending,
       max(key_limit) AS key_limit
FROM {s}.skiplock_jobs
WHERE state IN ('pending', 'running') AND segment = 4
  AND ($2::text IS NULL OR queue = $2) AND ($3::text IS NULL OR task = $3)
GROUP BY concurrency_key
ORDER BY running DESC, ready DESC, pending DESC, concurrency_key
LIMIT $4

-- name: JOB_BLOCKED_KEYS
-- The $1 ordered keys a dead job holds (ordering_on_dead 'block'), oldest first: the dead
-- job and how many live jobs wait behind it (the dead partition's blocking index).
SELECT d.concurrency_key AS key, min(d.id) AS dead_job_id,
       (SELECT count(*) FROM {s}.skiplock_jobs l
        WHERE l.state IN ('pending', 'running') AND l.segment = 4
          AND l.concurrency_key = d.concurrency_key) AS waiting
FROM {s}.skiplock_jobs d
WHERE d.state = 'dead' AND d.key_order = 'block'
GROUP BY d.concurrency_key
ORDER BY min(d.id)
LIMIT $1

-- name: KEY_TURNS_PRUNE
-- The turn rows of keys with no live job, among the $2 keys after $1 (key order; NULL: from
-- the first): one probe of the keyed segment's head index a row; a row a claim holds this
-- instant is left for the next look (SKIP LOCKED: the upkeep never waits on a claim, so the
-- two never wait on each other). Returns the last key read (NULL: the end was reached).
WITH slice AS MATERIALIZED (
    SELECT concurrency_key AS k FROM {s}.skiplock_key_turns
    WHERE concurrency_key > coalesce($1::text, '') ORDER BY concurrency_key LIMIT $2
), gone AS (
    DELETE FROM {s}.skiplock_key_turns WHERE concurrency_key = ANY(ARRAY(
        SELECT t.concurrency_key FROM {s}.skiplock_key_turns t
        WHERE t.concurrency_key IN (SELECT k FROM slice)
          AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j
                          WHERE j.state IN ('pending', 'running') AND j.segment = 4
                            AND j.concurrency_key = t.concurrency_key)
        FOR UPDATE SKIP LOCKED))
    RETURNING 1
)
SELECT CASE WHEN (SELECT count(*) FROM slice) >= $2 THEN (SELECT max(k) FROM slice) END AS last,
       (SELECT count(*) FROM gone) AS removed
