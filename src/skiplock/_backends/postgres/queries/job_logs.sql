-- name: JOB_LOGS_WRITE
-- Keep attempts' logs ($1 job ids, $2 attempts, $3 lines as JSON, $4 lines cut, $5 bytes
-- cut; one entry an attempt): an attempt written again (a released attempt runs again under
-- its number) replaces its log.
INSERT INTO {s}.skiplock_job_logs (job_id, attempt, lines, cut_lines, cut_bytes)
SELECT * FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::integer[], $5::bigint[])
ON CONFLICT (job_id, attempt) DO UPDATE
SET lines = excluded.lines, cut_lines = excluded.cut_lines, cut_bytes = excluded.cut_bytes,
    written_at = now()

-- name: JOB_LOGS_READ
-- The logs of one job's attempts ($1), by attempt.
SELECT job_id, attempt, lines, cut_lines, cut_bytes FROM {s}.skiplock_job_logs
WHERE job_id = $1 ORDER BY attempt

-- name: JOB_LOGS_PRUNE
-- Delete the logs of up to $1 jobs that are gone (pruned, by a batch or a dropped history
-- day, or deleted): a log never outlives its job. OFFSET 0 keeps the NOT EXISTS a probe
-- of each partition's id index a log (the few jobs that keep logs), never an anti join that
-- hashes every job of the table.
DELETE FROM {s}.skiplock_job_logs WHERE job_id IN (
    SELECT l.job_id FROM {s}.skiplock_job_logs l
    WHERE NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j WHERE j.id = l.job_id OFFSET 0)
    LIMIT $1
)
