-- name: CRON_SLOT_INSERT
-- Claim one slot of one schedule; no row back means another scheduler already has it.
INSERT INTO {s}.skiplock_cron_slots (schedule, slot) VALUES ($1, $2)
ON CONFLICT DO NOTHING RETURNING 1

-- name: CRON_SLOT_INSERT_AT
-- Claim one slot with the time the claim was made given (Django's PeriodicDefer.created).
INSERT INTO {s}.skiplock_cron_slots (schedule, slot, created_at)
VALUES ($1, $2, coalesce($3::timestamptz, now()))
ON CONFLICT DO NOTHING RETURNING 1

-- name: CRON_PREVIOUS_RUN_LIVE
-- Whether a job this schedule enqueued is still pending or running (for overlap=False).
SELECT EXISTS (
    SELECT 1 FROM {s}.skiplock_cron_slots c JOIN {s}.skiplock_jobs j ON j.id = c.job_id
    WHERE c.schedule = $1 AND j.state IN ('pending', 'running')
)

-- name: CRON_SLOT_SET_OUTCOME
-- Record what the claimed slot did: the job it enqueued, or that it was skipped.
UPDATE {s}.skiplock_cron_slots SET job_id = $3, skipped = $4 WHERE schedule = $1 AND slot = $2

-- name: CRON_LAST_SLOTS
-- The most recent slot claimed per schedule.
SELECT schedule, max(slot) AS slot FROM {s}.skiplock_cron_slots GROUP BY schedule

-- name: CRON_LAST_RUNS
-- Each schedule's most recent slot and the job it enqueued.
SELECT DISTINCT ON (schedule) schedule, slot, job_id
FROM {s}.skiplock_cron_slots ORDER BY schedule, slot DESC

-- name: CRON_SLOTS_PRUNE
-- Forget slots older than the cut-off.
DELETE FROM {s}.skiplock_cron_slots WHERE slot < $1

-- name: JOB_IMPORT_OUTCOME
-- A finished task moved in from another queue's table (Django's import_tasks_db): the row
-- just inserted pending in this transaction takes the outcome it had there.
UPDATE {s}.skiplock_jobs
SET state = $2, attempt = $3, created_at = $4, attempted_at = $5, started_at = $5,
    finished_at = $6, result = $7::jsonb, errors = $8::jsonb, locked_by = $9
WHERE id = $1 AND state = 'pending'
