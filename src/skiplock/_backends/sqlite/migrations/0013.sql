-- migration: unique windows

-- A succeeded job with a window keeps its key until then (unique_for=). The day tables gain
-- the column after the migrations (sqlite_history.follow_live).
ALTER TABLE skiplock_jobs_live ADD COLUMN unique_until REAL
