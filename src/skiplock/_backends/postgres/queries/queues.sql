-- name: QUEUE_LIMITED
-- Queues whose claims must go through their row lock (global concurrency or a rate, or
-- priority aging: its order is read and taken under the lock).
SELECT name FROM {s}.skiplock_queues
WHERE NOT paused AND (max_running IS NOT NULL OR rate_per_s IS NOT NULL OR aging_s IS NOT NULL)

-- name: QUEUE_LOCK
-- Serialise claimers of one limited queue; the row's limits and recent starts.
SELECT max_running, rate_per_s, paused, recent_starts,
       extract(epoch FROM coalesce($2::timestamptz, now()))::float8 AS now, aging_s
FROM {s}.skiplock_queues WHERE name = $1 FOR UPDATE

-- name: QUEUE_RUNNING
-- Jobs of one queue running anywhere.
SELECT count(*) FROM {s}.skiplock_jobs WHERE queue = $1 AND state = 'running'

-- name: QUEUE_STARTS_SET
-- Remember a rate-limited queue's starts within its rate's window (a sliding window).
UPDATE {s}.skiplock_queues SET recent_starts = $2 WHERE name = $1

-- name: QUEUE_SET_PAUSED
-- Pause or resume a queue (creating its settings row if needed).
INSERT INTO {s}.skiplock_queues (name, paused) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = now()

-- name: QUEUE_SET_LIMITS
-- Set the given ones ($6: max_depth, max_running, rate_per_s, aging_s) of a queue's bound,
-- limits and aging (NULL lifts one), keeping the others and its pause flag. A rate set anew
-- starts its window afresh.
INSERT INTO {s}.skiplock_queues AS q (name, max_depth, max_running, rate_per_s, aging_s)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (name) DO UPDATE
SET max_depth = CASE WHEN 'max_depth' = ANY($6::text[]) THEN excluded.max_depth
                     ELSE q.max_depth END,
    max_running = CASE WHEN 'max_running' = ANY($6::text[]) THEN excluded.max_running
                       ELSE q.max_running END,
    rate_per_s = CASE WHEN 'rate_per_s' = ANY($6::text[]) THEN excluded.rate_per_s
                      ELSE q.rate_per_s END,
    aging_s = CASE WHEN 'aging_s' = ANY($6::text[]) THEN excluded.aging_s ELSE q.aging_s END,
    recent_starts = CASE WHEN 'rate_per_s' = ANY($6::text[]) THEN '{}' ELSE q.recent_starts END,
    updated_at = now()

-- name: QUEUE_LIST
-- Every queue with settings or live jobs: its settings and live counts, reading no history:
-- the pending rows through the per-queue pending index, the running ones through the lease
-- index, each once (a DISTINCT over "state IN (live)" read the whole table, and per-queue
-- subqueries priced it past JIT's threshold: ~1 s of compiling for a sub-millisecond read).
WITH pending AS (
    SELECT queue, count(*) AS n FROM {s}.skiplock_jobs WHERE state = 'pending' GROUP BY queue
), running AS (
    SELECT queue, count(*) FILTER (WHERE started_at IS NOT NULL) AS started,
           count(*) FILTER (WHERE started_at IS NULL) AS claimed
    FROM {s}.skiplock_jobs WHERE state = 'running' GROUP BY queue
), names AS (
    SELECT name FROM {s}.skiplock_queues UNION SELECT queue FROM pending
    UNION SELECT queue FROM running
)
SELECT n.name, q.max_depth, q.max_running, q.rate_per_s, coalesce(q.paused, false) AS paused,
       coalesce(p.n, 0) AS pending, coalesce(r.started, 0) AS running,
       coalesce(r.claimed, 0) AS claimed, q.aging_s
FROM names n
LEFT JOIN {s}.skiplock_queues q ON q.name = n.name
LEFT JOIN pending p ON p.queue = n.name
LEFT JOIN running r ON r.queue = n.name
ORDER BY n.name

-- name: QUEUE_KNOWN
-- Whether a settings row or any job row, finished ones too, names a queue (a person's queue
-- command refuses a name nothing knows: a typo would otherwise make a new queue). A name
-- with rows stops at its first; only an unknown one reads the whole table, once.
SELECT EXISTS (SELECT 1 FROM {s}.skiplock_queues WHERE name = $1)
    OR EXISTS (SELECT 1 FROM {s}.skiplock_jobs WHERE queue = $1)

-- name: QUEUE_INFO
-- One queue's settings and live counts (zeros and no limits for a name nothing uses).
WITH names AS (SELECT $1::text AS name)
SELECT n.name, q.max_depth, q.max_running, q.rate_per_s, coalesce(q.paused, false) AS paused,
       (SELECT count(*) FROM {s}.skiplock_jobs j
        WHERE j.queue = n.name AND j.state = 'pending') AS pending,
       (SELECT count(*) FROM {s}.skiplock_jobs j
        WHERE j.queue = n.name AND j.state = 'running' AND j.started_at IS NOT NULL) AS running,
       (SELECT count(*) FROM {s}.skiplock_jobs j
        WHERE j.queue = n.name AND j.state = 'running' AND j.started_at IS NULL) AS claimed,
       q.aging_s
FROM names n LEFT JOIN {s}.skiplock_queues q ON q.name = n.name

-- name: TASK_PAUSE
-- Pause a task name for $2 seconds of the database clock (the breaker) or until resumed
-- ($2 NULL: until NULL).
INSERT INTO {s}.skiplock_task_pauses (task, until, reason)
VALUES ($1, coalesce($4::timestamptz, now()) + $2::float8 * interval '1 second', $3)
ON CONFLICT (task) DO UPDATE SET until = excluded.until, reason = excluded.reason,
                                 created_at = now()

-- name: TASK_RESUME
-- Lift a task's pause; no row back means it was not paused.
DELETE FROM {s}.skiplock_task_pauses WHERE task = $1 RETURNING task

-- name: TASK_PAUSES
-- Task pauses still in force.
SELECT task, until, reason FROM {s}.skiplock_task_pauses
WHERE until IS NULL OR until > coalesce($1::timestamptz, now())
ORDER BY task
