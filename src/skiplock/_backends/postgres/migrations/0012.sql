-- migration: live segments

-- The live partition in segments (postgres_storage_sql.py, docs/design.md "Storage"): new jobs
-- go to the ring segment of the current second, and a segment is truncated once its jobs are
-- gone, so the dead versions a held MVCC horizon keeps are dropped with it instead of piling up
-- in the claim indexes. Existing live jobs go to the long segment. Adding the column rewrites
-- no row (a constant default), and only the live rows are copied.
LOCK TABLE {s}.skiplock_jobs IN ACCESS EXCLUSIVE MODE;
ALTER TABLE {s}.skiplock_jobs ADD COLUMN segment smallint NOT NULL DEFAULT 3;
ALTER TABLE {s}.skiplock_jobs ALTER COLUMN segment SET DEFAULT (floor(extract(epoch FROM statement_timestamp()) / 1)::bigint % 3)::smallint;
ALTER TABLE {s}.skiplock_jobs DETACH PARTITION {s}.skiplock_jobs_live;
ALTER TABLE {s}.skiplock_jobs_live RENAME TO skiplock_jobs_live_v11;
DROP TRIGGER skiplock_live_key_take ON {s}.skiplock_jobs_live_v11;
DROP TRIGGER skiplock_live_key_release ON {s}.skiplock_jobs_live_v11;
DROP INDEX {s}.skiplock_jobs_pending_idx;
DROP INDEX {s}.skiplock_jobs_queue_pending_idx;
DROP INDEX {s}.skiplock_jobs_lease_idx;
DROP INDEX {s}.skiplock_jobs_live_reclaimed_idx;
ALTER TABLE {s}.skiplock_jobs_live_v11
    RENAME CONSTRAINT skiplock_jobs_live_pkey TO skiplock_jobs_live_v11_pkey;

CREATE TABLE {s}.skiplock_jobs_live PARTITION OF {s}.skiplock_jobs
    FOR VALUES IN ('pending', 'running') PARTITION BY LIST (segment);
CREATE TABLE {s}.skiplock_jobs_live_s0 PARTITION OF {s}.skiplock_jobs_live
    (PRIMARY KEY (id)) FOR VALUES IN (0)
    WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,
          autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
          autovacuum_vacuum_cost_delay = 0);
CREATE INDEX skiplock_jobs_live_s0_pending_idx ON {s}.skiplock_jobs_live_s0 (priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_live_s0_queue_pending_idx ON {s}.skiplock_jobs_live_s0 (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_live_s0_lease_idx ON {s}.skiplock_jobs_live_s0 (lease_expires_at) WHERE state = 'running';
CREATE INDEX skiplock_jobs_live_s0_reclaimed_idx ON {s}.skiplock_jobs_live_s0 (reclaimed_at) WHERE reclaimed_at IS NOT NULL;

CREATE TABLE {s}.skiplock_jobs_live_s1 PARTITION OF {s}.skiplock_jobs_live
    (PRIMARY KEY (id)) FOR VALUES IN (1)
    WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,
          autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
          autovacuum_vacuum_cost_delay = 0);
CREATE INDEX skiplock_jobs_live_s1_pending_idx ON {s}.skiplock_jobs_live_s1 (priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_live_s1_queue_pending_idx ON {s}.skiplock_jobs_live_s1 (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_live_s1_lease_idx ON {s}.skiplock_jobs_live_s1 (lease_expires_at) WHERE state = 'running';
CREATE INDEX skiplock_jobs_live_s1_reclaimed_idx ON {s}.skiplock_jobs_live_s1 (reclaimed_at) WHERE reclaimed_at IS NOT NULL;

CREATE TABLE {s}.skiplock_jobs_live_s2 PARTITION OF {s}.skiplock_jobs_live
    (PRIMARY KEY (id)) FOR VALUES IN (2)
    WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,
          autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
          autovacuum_vacuum_cost_delay = 0);
CREATE INDEX skiplock_jobs_live_s2_pending_idx ON {s}.skiplock_jobs_live_s2 (priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_live_s2_queue_pending_idx ON {s}.skiplock_jobs_live_s2 (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_live_s2_lease_idx ON {s}.skiplock_jobs_live_s2 (lease_expires_at) WHERE state = 'running';
CREATE INDEX skiplock_jobs_live_s2_reclaimed_idx ON {s}.skiplock_jobs_live_s2 (reclaimed_at) WHERE reclaimed_at IS NOT NULL;

CREATE TABLE {s}.skiplock_jobs_live_long PARTITION OF {s}.skiplock_jobs_live
    (PRIMARY KEY (id)) FOR VALUES IN (3)
    WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,
          autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
          autovacuum_vacuum_cost_delay = 0);
CREATE INDEX skiplock_jobs_live_long_pending_idx ON {s}.skiplock_jobs_live_long (priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_live_long_queue_pending_idx ON {s}.skiplock_jobs_live_long (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_live_long_lease_idx ON {s}.skiplock_jobs_live_long (lease_expires_at) WHERE state = 'running';
CREATE INDEX skiplock_jobs_live_long_reclaimed_idx ON {s}.skiplock_jobs_live_long (reclaimed_at) WHERE reclaimed_at IS NOT NULL;

CREATE INDEX skiplock_jobs_pending_idx ON {s}.skiplock_jobs_live (priority DESC, run_at, id)
    WHERE state = 'pending';
CREATE INDEX skiplock_jobs_queue_pending_idx
    ON {s}.skiplock_jobs_live (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_lease_idx ON {s}.skiplock_jobs_live (lease_expires_at)
    WHERE state = 'running';
CREATE INDEX skiplock_jobs_live_reclaimed_idx ON {s}.skiplock_jobs_live (reclaimed_at)
    WHERE reclaimed_at IS NOT NULL;
CREATE TRIGGER skiplock_live_key_take AFTER INSERT ON {s}.skiplock_jobs_live
    FOR EACH ROW WHEN (NEW.unique_key IS NOT NULL) EXECUTE FUNCTION {s}.skiplock_key_take();
CREATE TRIGGER skiplock_live_key_release AFTER DELETE ON {s}.skiplock_jobs_live
    FOR EACH ROW WHEN (OLD.unique_key IS NOT NULL) EXECUTE FUNCTION {s}.skiplock_key_release();

INSERT INTO {s}.skiplock_jobs_live SELECT * FROM {s}.skiplock_jobs_live_v11;
DROP TABLE {s}.skiplock_jobs_live_v11;
