-- migration: unique scopes

-- A unique key is unique within a key space (docs/design.md, "Unique keys: scopes"): the
-- task's own (unique_scope holds the task's name) or the shared one (the empty text,
-- unique_scope="shared"). A job row from before holds NULL: its task's own (the trigger
-- reads it so, should a person retry it), so no job row is rewritten. The keys held before
-- were one space for every task: they become their tasks' own, the rule from now on, which
-- none of them can break (they were unique across all tasks).
ALTER TABLE {s}.skiplock_jobs ADD COLUMN unique_scope text;
ALTER TABLE {s}.skiplock_keys ADD COLUMN unique_scope text;
UPDATE {s}.skiplock_keys k SET unique_scope = coalesce(j.unique_scope, j.task)
FROM {s}.skiplock_jobs j WHERE j.id = k.job_id;
DELETE FROM {s}.skiplock_keys WHERE unique_scope IS NULL;  -- no job: it held nothing
ALTER TABLE {s}.skiplock_keys ALTER COLUMN unique_scope SET NOT NULL;
ALTER TABLE {s}.skiplock_keys DROP CONSTRAINT skiplock_jobs_unique_idx;
ALTER TABLE {s}.skiplock_keys
    ADD CONSTRAINT skiplock_jobs_unique_idx PRIMARY KEY (unique_key, unique_scope);

CREATE OR REPLACE FUNCTION {s}.skiplock_key_take() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM {s}.skiplock_keys WHERE unique_key = NEW.unique_key AND job_id = NEW.id;
    IF NOT FOUND THEN
        INSERT INTO {s}.skiplock_keys (unique_key, unique_scope, job_id, held_until)
        VALUES (NEW.unique_key, coalesce(NEW.unique_scope, NEW.task), NEW.id,
                CASE WHEN NEW.state = 'succeeded' THEN NEW.unique_until END);
    END IF;
    RETURN NULL;
END
$$;
