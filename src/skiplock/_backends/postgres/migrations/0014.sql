-- migration: unique windows

-- unique_until: a succeeded job keeps its key until then (unique_for=); held_until: the
-- same on the key's row (NULL: held while the row exists, as before).
ALTER TABLE {s}.skiplock_jobs ADD COLUMN unique_until timestamptz;
ALTER TABLE {s}.skiplock_keys ADD COLUMN held_until timestamptz;

-- A job entering history with its key keeps it until its window closes (NULL: until the row
-- goes); one entering the live partition holds it while it stays there.
CREATE OR REPLACE FUNCTION {s}.skiplock_key_take() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM {s}.skiplock_keys WHERE unique_key = NEW.unique_key AND job_id = NEW.id;
    IF NOT FOUND THEN
        INSERT INTO {s}.skiplock_keys (unique_key, job_id, held_until)
        VALUES (NEW.unique_key, NEW.id,
                CASE WHEN NEW.state = 'succeeded' THEN NEW.unique_until END);
    END IF;
    RETURN NULL;
END
$$;
