-- migration: payload version

-- Which version of its task's arguments a job holds (``@app.task(version=...)``), so a worker
-- can upcast an older payload and leave a newer one to a worker that knows it. NULL (rows
-- written before this migration) is version 1. Nullable: adding it rewrites no row.
ALTER TABLE {s}.skiplock_jobs ADD COLUMN payload_version integer;
