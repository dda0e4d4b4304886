-- migration: unique scopes

-- A unique key is unique within a key space (docs/design.md, "Unique keys: scopes"): the
-- task's own (unique_scope holds the task's name) or the shared one (the empty text,
-- unique_scope="shared"). The keys held before were one space for every task: they become
-- their tasks' own, the rule from now on, which no two of them can break (they were unique
-- across all tasks). Rows of the day tables keep NULL: the task's own, should a person
-- retry one. The day tables gain the column after the migrations (sqlite_history.follow_live)
-- and no semicolon may stand in a comment: migrate splits on them.
ALTER TABLE skiplock_jobs_live ADD COLUMN unique_scope TEXT;
UPDATE skiplock_jobs_live SET unique_scope = task WHERE unique_key IS NOT NULL;
DROP INDEX skiplock_jobs_unique_idx;
CREATE UNIQUE INDEX skiplock_jobs_unique_idx ON skiplock_jobs_live (unique_key, unique_scope)
    WHERE unique_key IS NOT NULL AND (state IN ('pending', 'running') OR (state = 'succeeded' AND unique_succeeded))
