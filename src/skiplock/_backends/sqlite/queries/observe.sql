-- name: JOB_STATS_NOW
SELECT :now

-- name: JOB_STATS_LIVE
-- Live depth per (queue, task) at :now: pending jobs ready and scheduled, those waiting for a
-- retry, jobs claimed ahead and running, jobs in waiting (a workflow's), and the oldest ready
-- job's run_at.
SELECT queue, task,
       sum(run_at <= :now) AS ready,
       sum(run_at > :now) AS scheduled,
       sum(attempt > 0) AS retrying,
       0 AS claimed, 0 AS running, 0 AS waiting,
       min(CASE WHEN run_at <= :now THEN run_at END) AS oldest_ready
FROM skiplock_jobs_live
WHERE state = 'pending' AND (:queue IS NULL OR queue = :queue) AND (:task IS NULL OR task = :task)
GROUP BY queue, task
UNION ALL
SELECT queue, task, 0, 0, 0, sum(started_at IS NULL), sum(started_at IS NOT NULL), 0, NULL
FROM skiplock_jobs_live
WHERE state = 'running' AND (:queue IS NULL OR queue = :queue) AND (:task IS NULL OR task = :task)
GROUP BY queue, task
UNION ALL
SELECT queue, task, 0, 0, 0, 0, 0, count(*), NULL
FROM skiplock_jobs_live
WHERE state = 'waiting' AND (:queue IS NULL OR queue = :queue) AND (:task IS NULL OR task = :task)
GROUP BY queue, task

-- name: JOB_STATS_FINISHED
-- Jobs finished in the window per (queue, task), through the finished index's range: how each
-- ended, how many attempts it took (one cancelled before it ever ran counts in no bucket),
-- and its attempts before the last (the retries it used).
SELECT queue, task,
       sum(state = 'succeeded') AS succeeded,
       sum(state = 'cancelled') AS cancelled,
       sum(state = 'dead') AS dead,
       sum(attempt = 1) AS attempts_1,
       sum(attempt = 2) AS attempts_2,
       sum(attempt = 3) AS attempts_3,
       sum(attempt >= 4) AS attempts_4_plus,
       sum(max(attempt - 1, 0)) AS retries
FROM skiplock_jobs
WHERE state IN ('succeeded', 'cancelled', 'dead') AND finished_at > :since AND finished_at <= :now AND (:queue IS NULL OR queue = :queue) AND (:task IS NULL OR task = :task)
GROUP BY queue, task

-- name: JOB_STATS_RECLAIMS
-- Jobs whose expired lease was reclaimed in the window, per (queue, task), from the reclaimed
-- rows' index.
SELECT queue, task, count(*) AS reclaims
FROM skiplock_jobs
WHERE reclaimed_at > :since AND reclaimed_at <= :now AND (:queue IS NULL OR queue = :queue) AND (:task IS NULL OR task = :task)
GROUP BY queue, task

-- name: JOB_STATS_PERCENTILES
-- Claim latency (attempted_at - ready_at of each job's last claim in the window) and run
-- duration (run_s of jobs finished in the window), one row per sample in index order: SQLite
-- would sort them for a GROUP BY or a window function, so percentiles.py buckets the stream
-- (p50/p95 < 1 % below the exact nearest rank, max exact).
WITH claims AS MATERIALIZED (
    SELECT queue, task, attempted_at, ready_at FROM skiplock_jobs_live
    WHERE state = 'pending' AND attempted_at > :since AND (:queue IS NULL OR queue = :queue) AND (:task IS NULL OR task = :task)
    UNION ALL
    SELECT queue, task, attempted_at, ready_at FROM skiplock_jobs_live
    WHERE state = 'running' AND attempted_at > :since AND (:queue IS NULL OR queue = :queue) AND (:task IS NULL OR task = :task)
    UNION ALL
    SELECT queue, task, attempted_at, ready_at FROM skiplock_jobs
    WHERE state IN ('succeeded', 'cancelled', 'dead') AND finished_at > :since AND finished_at <= :now
      AND attempted_at > :since AND (:queue IS NULL OR queue = :queue) AND (:task IS NULL OR task = :task)
)
SELECT queue, task, 'claim' AS kind, attempted_at - ready_at AS v
FROM claims WHERE ready_at IS NOT NULL AND attempted_at <= :now
UNION ALL
SELECT queue, task, 'run', run_s FROM skiplock_jobs
WHERE state IN ('succeeded', 'cancelled', 'dead') AND finished_at > :since AND finished_at <= :now
  AND run_s IS NOT NULL AND (:queue IS NULL OR queue = :queue) AND (:task IS NULL OR task = :task)

-- name: WORKER_BEAT
-- Upsert a worker's registry row on its maintenance beat: its shape, its load, :now as its
-- heartbeat, when it last claimed (:claimed_ago seconds before now, NULL: never), its
-- silence limit, its OS process and its supervisor's restarts, its process tasks' children
-- (JSON).
INSERT INTO skiplock_workers
    (id, name, host, pid, queues, concurrency, running, processed, started_at, heartbeat_at,
     last_claim_at, gone_after_s, process, restarts, restarts_in_a_row, children)
VALUES (:id, :name, :host, :pid, :queues, :concurrency, :running, :processed, :now, :now,
        :now - :claimed_ago, :gone_after_s, :process, :restarts, :restarts_in_a_row, :children)
ON CONFLICT (id) DO UPDATE
SET running = excluded.running, processed = excluded.processed,
    heartbeat_at = excluded.heartbeat_at, last_claim_at = excluded.last_claim_at,
    gone_after_s = excluded.gone_after_s, process = excluded.process,
    restarts = excluded.restarts, restarts_in_a_row = excluded.restarts_in_a_row,
    children = excluded.children

-- name: WORKER_DELETE
-- A worker leaves the registry as it stops.
DELETE FROM skiplock_workers WHERE id = :id

-- name: WORKER_PRUNE
-- Forget workers silent for more than :silent_s seconds (gone without a word).
DELETE FROM skiplock_workers WHERE heartbeat_at < :now - :silent_s

-- name: WORKER_LIST
-- Every registered worker, with how long since its heartbeat.
SELECT id, name, host, pid, queues, concurrency, running, processed, started_at,
       heartbeat_at, last_claim_at, gone_after_s, process, restarts, restarts_in_a_row,
       children, :now - heartbeat_at AS silent_s
FROM skiplock_workers ORDER BY name, id
