-- name: QUEUE_LIMITED
-- Queues whose claims must go through their own limit check (concurrency or a rate), or rank
-- by aged priority.
SELECT name FROM skiplock_queues
WHERE NOT paused AND (max_running IS NOT NULL OR rate_per_s IS NOT NULL OR aging_s IS NOT NULL)

-- name: QUEUE_LOCK
-- One limited queue's limits and recent starts (the write transaction serialises claimers).
SELECT max_running, rate_per_s, paused, recent_starts, aging_s FROM skiplock_queues
WHERE name = :queue

-- name: QUEUE_RUNNING
-- Jobs of one queue running anywhere.
SELECT count(*) FROM skiplock_jobs_live WHERE queue = :queue AND state = 'running'

-- name: QUEUE_STARTS_SET
-- Remember a rate-limited queue's starts within its rate's window (a sliding window).
UPDATE skiplock_queues SET recent_starts = :starts WHERE name = :queue

-- name: QUEUE_SET_PAUSED
-- Pause or resume a queue (creating its settings row if needed).
INSERT INTO skiplock_queues (name, paused, updated_at) VALUES (:name, :paused, :now)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at

-- name: QUEUE_SET_LIMITS
-- Set the given ones (:set_*) of a queue's bound, limits and aging (NULL lifts one), keeping
-- the others and its pause flag. A rate set anew starts its window afresh.
INSERT INTO skiplock_queues (name, max_depth, max_running, rate_per_s, aging_s, updated_at)
VALUES (:name, :max_depth, :max_running, :rate, :aging, :now)
ON CONFLICT (name) DO UPDATE
SET max_depth = CASE WHEN :set_depth THEN excluded.max_depth ELSE max_depth END,
    max_running = CASE WHEN :set_running THEN excluded.max_running ELSE max_running END,
    rate_per_s = CASE WHEN :set_rate THEN excluded.rate_per_s ELSE rate_per_s END,
    aging_s = CASE WHEN :set_aging THEN excluded.aging_s ELSE aging_s END,
    recent_starts = CASE WHEN :set_rate THEN '[]' ELSE recent_starts END,
    updated_at = excluded.updated_at

-- name: QUEUE_KNOWN
-- Whether a settings row or any job row, finished ones too, names a queue (a person's queue
-- command refuses a name nothing knows: a typo would otherwise make a new queue).
SELECT EXISTS (SELECT 1 FROM skiplock_queues WHERE name = :queue)
    OR EXISTS (SELECT 1 FROM skiplock_jobs WHERE queue = :queue)

-- name: QUEUE_LIST
-- Every queue with settings or live jobs: its settings and live counts, reading no history:
-- the pending rows through the per-queue pending index, the running ones through the lease
-- index, each once (a DISTINCT over "state IN (live)" read the whole table).
WITH pending AS (
    SELECT queue, count(*) AS n FROM skiplock_jobs_live WHERE state = 'pending' GROUP BY queue
), running AS (
    SELECT queue, sum(started_at IS NOT NULL) AS started, sum(started_at IS NULL) AS claimed
    FROM skiplock_jobs_live WHERE state = 'running' GROUP BY queue
), names AS (
    SELECT name FROM skiplock_queues UNION SELECT queue FROM pending
    UNION SELECT queue FROM running
)
SELECT n.name, q.max_depth, q.max_running, q.rate_per_s, coalesce(q.paused, 0),
       coalesce(p.n, 0), coalesce(r.started, 0), coalesce(r.claimed, 0), q.aging_s
FROM names n
LEFT JOIN skiplock_queues q ON q.name = n.name
LEFT JOIN pending p ON p.queue = n.name
LEFT JOIN running r ON r.queue = n.name
ORDER BY n.name

-- name: QUEUE_INFO
-- One queue's settings and live counts (zeros and no limits for a name nothing uses).
WITH names AS (SELECT :queue AS name)
SELECT n.name, q.max_depth, q.max_running, q.rate_per_s, coalesce(q.paused, 0),
       (SELECT count(*) FROM skiplock_jobs_live j WHERE j.queue = n.name AND j.state = 'pending'),
       (SELECT count(*) FROM skiplock_jobs_live j
        WHERE j.queue = n.name AND j.state = 'running' AND j.started_at IS NOT NULL),
       (SELECT count(*) FROM skiplock_jobs_live j
        WHERE j.queue = n.name AND j.state = 'running' AND j.started_at IS NULL),
       q.aging_s
FROM names n LEFT JOIN skiplock_queues q ON q.name = n.name

-- name: TASK_PAUSE
-- Pause a task name until a time (the breaker) or until resumed (until NULL).
INSERT INTO skiplock_task_pauses (task, until, reason, created_at)
VALUES (:task, :until, :reason, :now)
ON CONFLICT (task) DO UPDATE SET until = excluded.until, reason = excluded.reason,
                                 created_at = excluded.created_at

-- name: TASK_RESUME
-- Lift a task's pause.
DELETE FROM skiplock_task_pauses WHERE task = :task

-- name: TASK_PAUSES
-- Task pauses still in force.
SELECT task, until, reason FROM skiplock_task_pauses
WHERE until IS NULL OR until > :now ORDER BY task
