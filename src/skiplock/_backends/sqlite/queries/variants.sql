-- name: JOB_GET_AVAILABLE_IN_QUEUES_BRANCH
SELECT * FROM (
        SELECT id, priority, run_at FROM skiplock_jobs_live
        WHERE lane = :lane AND queue = :q{i} AND state = 'pending' AND (concurrency_key IS NOT NULL) = 0
          AND run_at <= :now
          AND :q{i} NOT IN (SELECT name FROM skiplock_queues
                            WHERE paused OR (NOT :limited AND (max_running IS NOT NULL
                                                              OR rate_per_s IS NOT NULL
                                                              OR aging_s IS NOT NULL)))
          AND task NOT IN (SELECT task FROM skiplock_task_pauses
                           WHERE until IS NULL OR until > :now)
        ORDER BY priority DESC, run_at, id
        LIMIT :limit)

-- name: JOB_GET_NOTHING
SELECT 1 WHERE 0
