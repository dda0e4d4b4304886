-- migration: results

-- What a job returned (strict JSON text, NULL for None or keep_result=False) and its last
-- progress record (no semicolons in comments: migrate splits on them).
ALTER TABLE skiplock_jobs ADD COLUMN result TEXT;
ALTER TABLE skiplock_jobs ADD COLUMN progress TEXT
