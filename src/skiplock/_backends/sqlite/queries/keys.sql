-- name: JOB_BUSIEST_KEYS
-- The :limit keys with the most running jobs, then the most ready (at :now), of queue :queue
-- and task :task (NULL: any): each key's live jobs counted (the keyed indexes' rows alone).
SELECT concurrency_key AS key,
       sum(state = 'running') AS running,
       sum(state = 'pending' AND run_at <= :now) AS ready,
       sum(state = 'pending') AS pending,
       max(key_limit) AS key_limit
FROM skiplock_jobs_live
WHERE state IN ('pending', 'running') AND concurrency_key IS NOT NULL
  AND (:queue IS NULL OR queue = :queue) AND (:task IS NULL OR task = :task)
GROUP BY concurrency_key
ORDER BY running DESC, ready DESC, pending DESC, concurrency_key
LIMIT :limit

-- name: JOB_BLOCKED_KEYS
-- The :limit ordered keys a dead job holds (ordering_on_dead 'block'), oldest first: the dead
-- job and how many live jobs wait behind it.
SELECT d.concurrency_key AS key, min(d.id) AS dead_job_id,
       (SELECT count(*) FROM skiplock_jobs_live l
        WHERE l.state IN ('pending', 'running') AND l.concurrency_key IS NOT NULL
          AND l.concurrency_key = d.concurrency_key) AS waiting
FROM skiplock_jobs_live d
WHERE d.state = 'dead' AND d.key_order = 'block'
GROUP BY d.concurrency_key
ORDER BY min(d.id)
LIMIT :limit

-- name: KEY_TURNS_PRUNE
-- The turn rows of keys with no live job, among the :most keys after :after (key order).
DELETE FROM skiplock_key_turns WHERE concurrency_key IN (
    SELECT t.concurrency_key FROM (
        SELECT concurrency_key FROM skiplock_key_turns WHERE concurrency_key > :after
        ORDER BY concurrency_key LIMIT :most
    ) t
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs_live j
                      WHERE j.state IN ('pending', 'running') AND j.concurrency_key IS NOT NULL
                        AND j.concurrency_key = t.concurrency_key)
)
