-- migration: payload version

-- Which version of its task's arguments a job holds (see PostgreSQL's migration 9). NULL
-- (rows written before it) is version 1.
ALTER TABLE skiplock_jobs ADD COLUMN payload_version INTEGER
