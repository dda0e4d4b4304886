-- name: JOB_LOGS_WRITE
-- Keep one attempt's log: an attempt written again (a released attempt runs again under its
-- number) replaces its log.
INSERT INTO skiplock_job_logs (job_id, attempt, lines, cut_lines, cut_bytes, written_at)
VALUES (:job_id, :attempt, :lines, :cut_lines, :cut_bytes, :now)
ON CONFLICT (job_id, attempt) DO UPDATE
SET lines = excluded.lines, cut_lines = excluded.cut_lines, cut_bytes = excluded.cut_bytes,
    written_at = excluded.written_at

-- name: JOB_LOGS_READ
-- The logs of one job's attempts, by attempt.
SELECT job_id, attempt, lines, cut_lines, cut_bytes FROM skiplock_job_logs
WHERE job_id = :job_id ORDER BY attempt

-- name: JOB_LOGS_PRUNE
-- Delete the logs of up to :batch jobs that are gone (pruned, by a batch or a dropped history
-- day, or deleted): a log never outlives its job.
DELETE FROM skiplock_job_logs WHERE job_id IN (
    SELECT l.job_id FROM skiplock_job_logs l
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id = l.job_id)
    LIMIT :batch
)
