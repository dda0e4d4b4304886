-- migration: results

-- What a job returned (strict JSON; NULL for None or keep_result=False) and its last progress
-- record. Nullable without a default: adding them rewrites no row of a populated table.
ALTER TABLE {s}.skiplock_jobs ADD COLUMN result jsonb;
ALTER TABLE {s}.skiplock_jobs ADD COLUMN progress jsonb;
