-- migration: partitioned storage

-- Storage by state (postgres_storage_sql.py, docs/design.md "Storage"). Measured on a 10 M-row
-- table: see docs/operations.md, "Upgrading to partitioned storage".
LOCK TABLE {s}.skiplock_jobs IN ACCESS EXCLUSIVE MODE;
ALTER TABLE {s}.skiplock_jobs RENAME TO skiplock_jobs_v10;
ALTER INDEX {s}.skiplock_jobs_pkey RENAME TO skiplock_jobs_v10_pkey;
ALTER INDEX {s}.skiplock_jobs_unique_idx RENAME TO skiplock_jobs_v10_unique_idx;
ALTER INDEX {s}.skiplock_jobs_finished_idx RENAME TO skiplock_jobs_v10_finished_idx;
ALTER INDEX {s}.skiplock_jobs_reclaimed_idx RENAME TO skiplock_jobs_v10_reclaimed_idx;
-- The claim indexes hold live rows only: rebuilt on the live partition.
DROP INDEX {s}.skiplock_jobs_pending_idx;
DROP INDEX {s}.skiplock_jobs_queue_pending_idx;
DROP INDEX {s}.skiplock_jobs_lease_idx;
-- Ids keep counting from the identity's last value: one sequence serves every partition.
CREATE SEQUENCE {s}.skiplock_job_ids AS bigint;
SELECT setval('{s}.skiplock_job_ids', last_value, is_called) FROM {s}.skiplock_jobs_id_seq;
ALTER TABLE {s}.skiplock_jobs_v10 ALTER COLUMN id DROP IDENTITY;
-- A final row without a finish time (an import of one) is stamped, so every history row has
-- the partition key; live rows move to their own partition below.
UPDATE {s}.skiplock_jobs_v10 SET finished_at = coalesce(attempted_at, created_at)
WHERE state IN ('succeeded', 'cancelled', 'dead') AND finished_at IS NULL;

CREATE TABLE {s}.skiplock_jobs
    (LIKE {s}.skiplock_jobs_v10 INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY LIST (state);
ALTER TABLE {s}.skiplock_jobs ALTER COLUMN id SET DEFAULT nextval('{s}.skiplock_job_ids');
ALTER SEQUENCE {s}.skiplock_job_ids OWNED BY {s}.skiplock_jobs.id;

-- The hot rows: vacuumed as soon as 2,000 rows changed, at full speed (a small table).
CREATE TABLE {s}.skiplock_jobs_live PARTITION OF {s}.skiplock_jobs
    (PRIMARY KEY (id)) FOR VALUES IN ('pending', 'running')
    WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,
          autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
          autovacuum_vacuum_cost_delay = 0);
CREATE INDEX skiplock_jobs_pending_idx ON {s}.skiplock_jobs_live (priority DESC, run_at, id)
    WHERE state = 'pending';
CREATE INDEX skiplock_jobs_queue_pending_idx
    ON {s}.skiplock_jobs_live (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_lease_idx ON {s}.skiplock_jobs_live (lease_expires_at)
    WHERE state = 'running';
CREATE INDEX skiplock_jobs_live_reclaimed_idx ON {s}.skiplock_jobs_live (reclaimed_at)
    WHERE reclaimed_at IS NOT NULL;

CREATE TABLE {s}.skiplock_jobs_dead PARTITION OF {s}.skiplock_jobs
    (PRIMARY KEY (id)) FOR VALUES IN ('dead');
CREATE INDEX skiplock_jobs_dead_finished_idx ON {s}.skiplock_jobs_dead (finished_at);
CREATE INDEX skiplock_jobs_dead_reclaimed_idx ON {s}.skiplock_jobs_dead (reclaimed_at)
    WHERE reclaimed_at IS NOT NULL;

CREATE TABLE {s}.skiplock_jobs_done PARTITION OF {s}.skiplock_jobs
    FOR VALUES IN ('succeeded', 'cancelled') PARTITION BY RANGE (finished_at);
CREATE TABLE {s}.skiplock_jobs_done_default PARTITION OF {s}.skiplock_jobs_done DEFAULT;
CREATE INDEX skiplock_jobs_done_default_id_idx ON {s}.skiplock_jobs_done_default (id);
CREATE INDEX skiplock_jobs_done_default_finished_idx
    ON {s}.skiplock_jobs_done_default (finished_at);
CREATE INDEX skiplock_jobs_done_default_reclaimed_idx
    ON {s}.skiplock_jobs_done_default (reclaimed_at) WHERE reclaimed_at IS NOT NULL;

INSERT INTO {s}.skiplock_jobs_live SELECT * FROM {s}.skiplock_jobs_v10
WHERE state IN ('pending', 'running');
INSERT INTO {s}.skiplock_jobs_dead SELECT * FROM {s}.skiplock_jobs_v10 WHERE state = 'dead';

-- Keys: the live holders and the succeeded jobs that keep theirs (read through the old unique
-- index), before that index goes.
CREATE TABLE {s}.skiplock_keys (
    unique_key text NOT NULL,
    job_id     bigint NOT NULL,
    CONSTRAINT skiplock_jobs_unique_idx PRIMARY KEY (unique_key)
);
CREATE INDEX skiplock_keys_job_idx ON {s}.skiplock_keys (job_id);
INSERT INTO {s}.skiplock_keys (unique_key, job_id)
SELECT unique_key, id FROM {s}.skiplock_jobs_v10
WHERE unique_key IS NOT NULL
  AND (state IN ('pending', 'running') OR (state = 'succeeded' AND unique_succeeded));

DELETE FROM {s}.skiplock_jobs_v10 WHERE state IN ('pending', 'running', 'dead');
DROP INDEX {s}.skiplock_jobs_v10_unique_idx;

-- The old table becomes the history partition of everything it holds (finished before the
-- day after its last finish, UTC); its rows are not rewritten: the attach reads them once to
-- check their bounds. Empty (a new database), it goes: the upkeep makes the days.
DO $$
DECLARE
    upto date := (SELECT (max(finished_at) AT TIME ZONE 'UTC')::date + 1
                  FROM {s}.skiplock_jobs_v10);
BEGIN
    IF upto IS NULL THEN
        DROP TABLE {s}.skiplock_jobs_v10;
        RETURN;
    END IF;
    EXECUTE format('ALTER TABLE %s.skiplock_jobs_v10 RENAME TO %I', '{s}',
                   'skiplock_jobs_done_to_' || to_char(upto, 'YYYYMMDD'));
    EXECUTE format('ALTER TABLE %s.skiplock_jobs_done ATTACH PARTITION %s.%I '
                   'FOR VALUES FROM (MINVALUE) TO (%L)', '{s}', '{s}',
                   'skiplock_jobs_done_to_' || to_char(upto, 'YYYYMMDD'), upto || ' 00:00+00');
END
$$;

-- Unique keys: taken when a keyed job enters the live partition (enqueue, retry, requeue) or
-- a succeeded job that keeps its key enters history; released when either leaves. The
-- enqueue takes its keys first (JOB_INSERT_MANY), so its insert finds them held already.
CREATE FUNCTION {s}.skiplock_key_take() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM {s}.skiplock_keys WHERE unique_key = NEW.unique_key AND job_id = NEW.id;
    IF NOT FOUND THEN
        INSERT INTO {s}.skiplock_keys (unique_key, job_id) VALUES (NEW.unique_key, NEW.id);
    END IF;
    RETURN NULL;
END
$$;
CREATE FUNCTION {s}.skiplock_key_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {s}.skiplock_keys WHERE unique_key = OLD.unique_key AND job_id = OLD.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER skiplock_live_key_take AFTER INSERT ON {s}.skiplock_jobs_live
    FOR EACH ROW WHEN (NEW.unique_key IS NOT NULL) EXECUTE FUNCTION {s}.skiplock_key_take();
CREATE TRIGGER skiplock_live_key_release AFTER DELETE ON {s}.skiplock_jobs_live
    FOR EACH ROW WHEN (OLD.unique_key IS NOT NULL) EXECUTE FUNCTION {s}.skiplock_key_release();
CREATE TRIGGER skiplock_done_key_take AFTER INSERT ON {s}.skiplock_jobs_done
    FOR EACH ROW WHEN (NEW.unique_key IS NOT NULL AND NEW.state = 'succeeded'
                       AND NEW.unique_succeeded)
    EXECUTE FUNCTION {s}.skiplock_key_take();
CREATE TRIGGER skiplock_done_key_release AFTER DELETE ON {s}.skiplock_jobs_done
    FOR EACH ROW WHEN (OLD.unique_key IS NOT NULL AND OLD.state = 'succeeded'
                       AND OLD.unique_succeeded)
    EXECUTE FUNCTION {s}.skiplock_key_release();
