-- name: JOB_STATS_NOW
-- The instant every statistic of one reading is taken at: the pinned $1, else the database's
-- now() (fixed for the transaction the reading runs in). SQLite's twin; PostgreSQL's reading
-- takes it with its snapshot (postgres/storage/reads.py, EXPORT).
SELECT coalesce($1::timestamptz, now()) AS now

-- name: JOB_STATS_LIVE
-- Live depth per (queue, task) at $1 ($2, the window's start, is unused here): pending jobs
-- ready and scheduled, those waiting for a retry, jobs claimed ahead and running, and the
-- oldest ready job's run_at (epoch seconds). Each state on its own partial index; the live
-- partition alone (the jobs in waiting are JOB_STATS_WAITING's, read with the rest).
SELECT queue, task,
       count(*) FILTER (WHERE run_at <= $1) AS ready,
       count(*) FILTER (WHERE run_at > $1) AS scheduled,
       count(*) FILTER (WHERE attempt > 0) AS retrying,
       0::bigint AS claimed, 0::bigint AS running, 0::bigint AS waiting,
       extract(epoch FROM min(run_at) FILTER (WHERE run_at <= $1))::float8 AS oldest_ready
FROM {s}.skiplock_jobs
WHERE state = 'pending' AND $2::timestamptz IS NOT NULL AND ($3::text IS NULL OR queue = $3) AND ($4::text IS NULL OR task = $4)
GROUP BY queue, task
UNION ALL
SELECT queue, task, 0, 0, 0,
       count(*) FILTER (WHERE started_at IS NULL),
       count(*) FILTER (WHERE started_at IS NOT NULL), 0, NULL
FROM {s}.skiplock_jobs
WHERE state = 'running' AND ($3::text IS NULL OR queue = $3) AND ($4::text IS NULL OR task = $4)
GROUP BY queue, task

-- name: JOB_STATS_WAITING
-- Jobs in waiting (a workflow's: their own partition) per (queue, task), in JOB_STATS_LIVE's
-- columns ($1 and $2 unused): read with the history, off the live partition.
SELECT queue, task, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, count(*),
       NULL::float8
FROM {s}.skiplock_jobs
WHERE state = 'waiting' AND $1::timestamptz IS NOT NULL AND $2::timestamptz IS NOT NULL
  AND ($3::text IS NULL OR queue = $3) AND ($4::text IS NULL OR task = $4)
GROUP BY queue, task

-- name: JOB_STATS_FINISHED
-- Jobs finished in the window ($2, $1] per (queue, task), through the finished index's range:
-- how each ended, how many attempts it took (a job cancelled before it ever ran counts in no
-- bucket), and its attempts before the last (the retries it used).
SELECT queue, task,
       count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
       count(*) FILTER (WHERE state = 'dead') AS dead,
       count(*) FILTER (WHERE attempt = 1) AS attempts_1,
       count(*) FILTER (WHERE attempt = 2) AS attempts_2,
       count(*) FILTER (WHERE attempt = 3) AS attempts_3,
       count(*) FILTER (WHERE attempt >= 4) AS attempts_4_plus,
       coalesce(sum(greatest(attempt - 1, 0)), 0)::bigint AS retries
FROM {s}.skiplock_jobs
WHERE state IN ('succeeded', 'cancelled', 'dead') AND finished_at > $2 AND finished_at <= $1 AND ($3::text IS NULL OR queue = $3) AND ($4::text IS NULL OR task = $4)
GROUP BY queue, task

-- name: JOB_STATS_RECLAIMS
-- Jobs whose expired lease was reclaimed in the window ($2, $1], per (queue, task), of the live
-- partition: a read of the reclaimed rows' index, which holds only rows ever reclaimed.
SELECT queue, task, count(*) AS reclaims
FROM {s}.skiplock_jobs
WHERE reclaimed_at > $2 AND reclaimed_at <= $1 AND state IN ('pending', 'running') AND ($3::text IS NULL OR queue = $3) AND ($4::text IS NULL OR task = $4)
GROUP BY queue, task

-- name: JOB_STATS_RECLAIMS_REST
-- JOB_STATS_RECLAIMS of every other partition: history, dead and waiting jobs.
SELECT queue, task, count(*) AS reclaims
FROM {s}.skiplock_jobs
WHERE reclaimed_at > $2 AND reclaimed_at <= $1 AND state IN ('succeeded', 'cancelled', 'dead', 'waiting') AND ($3::text IS NULL OR queue = $3) AND ($4::text IS NULL OR task = $4)
GROUP BY queue, task

-- name: JOB_STATS_PERCENTILES
-- Claim latency (attempted_at - ready_at of each job's last claim, for claims in the window
-- ($2, $1]) of the jobs still live, as log-scale histogram buckets per (queue, task, kind):
-- count, smallest and largest value. One hash aggregate over the window's index ranges, no
-- sort; percentiles.py merges them with JOB_STATS_PERCENTILES_REST's and walks the buckets to
-- p50/p95 (< 1 % below the exact nearest rank) and max (exact).
WITH claims AS MATERIALIZED (
    SELECT queue, task, attempted_at, ready_at FROM {s}.skiplock_jobs
    WHERE state = 'pending' AND attempted_at > $2 AND ($3::text IS NULL OR queue = $3) AND ($4::text IS NULL OR task = $4)
    UNION ALL
    SELECT queue, task, attempted_at, ready_at FROM {s}.skiplock_jobs
    WHERE state = 'running' AND attempted_at > $2 AND ($3::text IS NULL OR queue = $3) AND ($4::text IS NULL OR task = $4)
), samples AS (
    SELECT queue, task, 'claim' AS kind,
           extract(epoch FROM attempted_at - ready_at)::float8 AS v
    FROM claims WHERE ready_at IS NOT NULL AND attempted_at <= $1
)
SELECT queue, task, kind,
       floor(ln(greatest(v, 1e-06)) / ln(1 + 0.01))::int AS bucket,
       count(*) AS n, min(v) AS lo, max(v) AS hi
FROM samples GROUP BY queue, task, kind, 4

-- name: JOB_STATS_PERCENTILES_REST
-- JOB_STATS_PERCENTILES of the jobs finished in the window: their claims' latency, and run
-- duration (run_s of jobs finished in the window), read with the history.
WITH claims AS MATERIALIZED (
    SELECT queue, task, attempted_at, ready_at FROM {s}.skiplock_jobs
    WHERE state IN ('succeeded', 'cancelled', 'dead') AND finished_at > $2 AND finished_at <= $1 AND attempted_at > $2
      AND ($3::text IS NULL OR queue = $3) AND ($4::text IS NULL OR task = $4)
), samples AS (
    SELECT queue, task, 'claim' AS kind,
           extract(epoch FROM attempted_at - ready_at)::float8 AS v
    FROM claims WHERE ready_at IS NOT NULL AND attempted_at <= $1
    UNION ALL
    SELECT queue, task, 'run', run_s FROM {s}.skiplock_jobs
    WHERE state IN ('succeeded', 'cancelled', 'dead') AND finished_at > $2 AND finished_at <= $1 AND run_s IS NOT NULL
      AND ($3::text IS NULL OR queue = $3) AND ($4::text IS NULL OR task = $4)
)
SELECT queue, task, kind,
       floor(ln(greatest(v, 1e-06)) / ln(1 + 0.01))::int AS bucket,
       count(*) AS n, min(v) AS lo, max(v) AS hi
FROM samples GROUP BY queue, task, kind, 4

-- name: WORKER_BEAT
-- Upsert a worker's registry row ($1 its id) on its maintenance beat: its shape, its load, the
-- database's now as its heartbeat, when it last claimed ($9 seconds before now; NULL:
-- never), its silence limit, its OS process and its supervisor's restarts ($11-$14), its
-- process tasks' children ($15, JSON).
WITH now_ AS (SELECT coalesce($10::timestamptz, now()) AS t)
INSERT INTO {s}.skiplock_workers AS w
    (id, name, host, pid, queues, concurrency, running, processed, started_at, heartbeat_at,
     last_claim_at, gone_after_s, process, restarts, restarts_in_a_row, children)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, t, t, t - make_interval(secs => $9::float8),
       $11, $12, $13, $14, $15
FROM now_
ON CONFLICT (id) DO UPDATE
SET running = excluded.running, processed = excluded.processed,
    heartbeat_at = excluded.heartbeat_at, last_claim_at = excluded.last_claim_at,
    gone_after_s = excluded.gone_after_s, process = excluded.process,
    restarts = excluded.restarts, restarts_in_a_row = excluded.restarts_in_a_row,
    children = excluded.children

-- name: WORKER_DELETE
-- A worker leaves the registry as it stops.
DELETE FROM {s}.skiplock_workers WHERE id = $1

-- name: WORKER_PRUNE
-- Forget workers silent for more than $1 seconds of the database clock (gone without a word).
DELETE FROM {s}.skiplock_workers
WHERE heartbeat_at < coalesce($2::timestamptz, now()) - make_interval(secs => $1::float8)

-- name: WORKER_LIST
-- Every registered worker, with how long since its heartbeat and last claim by the database
-- clock.
SELECT id, name, host, pid, queues, concurrency, running, processed, started_at,
       heartbeat_at, last_claim_at, gone_after_s, process, restarts, restarts_in_a_row,
       children, extract(epoch FROM coalesce($1::timestamptz, now()) - heartbeat_at)::float8 AS silent_s
FROM {s}.skiplock_workers ORDER BY name, id
