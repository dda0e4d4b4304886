-- name: CRON_SLOT_INSERT
-- Claim one slot of one schedule; no change means another scheduler already has it.
INSERT OR IGNORE INTO skiplock_cron_slots (schedule, slot, created_at)
VALUES (:schedule, :slot, :now)

-- name: CRON_SLOT_INSERT_AT
-- Claim one slot with the time the claim was made given (Django's PeriodicDefer.created).
INSERT OR IGNORE INTO skiplock_cron_slots (schedule, slot, created_at)
VALUES (:schedule, :slot, coalesce(:created, :now))

-- name: CRON_PREVIOUS_RUN_LIVE
-- Whether a job this schedule enqueued is still pending or running (for overlap=False).
SELECT EXISTS (
    SELECT 1 FROM skiplock_cron_slots c JOIN skiplock_jobs_live j ON j.id = c.job_id
    WHERE c.schedule = :schedule AND j.state IN ('pending', 'running')
)

-- name: CRON_SLOT_SET_OUTCOME
-- Record what the claimed slot did: the job it enqueued, or that it was skipped.
UPDATE skiplock_cron_slots SET job_id = :job_id, skipped = :skipped
WHERE schedule = :schedule AND slot = :slot

-- name: CRON_LAST_SLOTS
-- The most recent slot claimed per schedule.
SELECT schedule, max(slot) FROM skiplock_cron_slots GROUP BY schedule

-- name: CRON_LAST_RUNS
-- Each schedule's most recent slot and the job it enqueued (SQLite gives the bare job_id
-- column from the row holding the max).
SELECT schedule, max(slot), job_id FROM skiplock_cron_slots GROUP BY schedule

-- name: CRON_SLOTS_PRUNE
-- Forget slots older than the cut-off.
DELETE FROM skiplock_cron_slots WHERE slot < :before
