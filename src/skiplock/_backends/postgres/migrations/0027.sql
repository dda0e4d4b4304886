-- migration: live generations

-- The live partition's segments become generations (postgres_rotation.py, docs/design.md
-- "Storage: segments no reader can hold"): each under a partitioned table of its own, so an old
-- one leaves with DETACH PARTITION ... CONCURRENTLY, which no reader blocks, where the ring's
-- truncate waited for every reader's lock. New jobs go to the generation a sequence names.
-- The ring's live jobs move to the long segment (a few seconds' worth) and its tables go.
LOCK TABLE {s}.skiplock_jobs IN ACCESS EXCLUSIVE MODE;
CREATE SEQUENCE {s}.skiplock_live_segment AS smallint MINVALUE 16 MAXVALUE 32767;
SELECT setval('{s}.skiplock_live_segment', 16, true);
CREATE TABLE {s}.skiplock_jobs_live_s16_p (LIKE {s}.skiplock_jobs_live INCLUDING CONSTRAINTS) PARTITION BY LIST (segment);
CREATE TABLE {s}.skiplock_jobs_live_s16 PARTITION OF {s}.skiplock_jobs_live_s16_p (PRIMARY KEY (id)) FOR VALUES IN (16) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,
          autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
          autovacuum_vacuum_cost_delay = 0);
CREATE INDEX skiplock_jobs_live_s16_pending_idx ON {s}.skiplock_jobs_live_s16 (priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_live_s16_queue_pending_idx ON {s}.skiplock_jobs_live_s16 (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_live_s16_lease_idx ON {s}.skiplock_jobs_live_s16 (lease_expires_at) WHERE state = 'running';
CREATE INDEX skiplock_jobs_live_s16_reclaimed_idx ON {s}.skiplock_jobs_live_s16 (reclaimed_at) WHERE reclaimed_at IS NOT NULL;
ALTER TABLE {s}.skiplock_jobs_live ATTACH PARTITION {s}.skiplock_jobs_live_s16_p FOR VALUES IN (16);
-- and the next, made ahead (postgres_rotation._advance)
CREATE TABLE {s}.skiplock_jobs_live_s17_p (LIKE {s}.skiplock_jobs_live INCLUDING CONSTRAINTS) PARTITION BY LIST (segment);
CREATE TABLE {s}.skiplock_jobs_live_s17 PARTITION OF {s}.skiplock_jobs_live_s17_p (PRIMARY KEY (id)) FOR VALUES IN (17) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,
          autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
          autovacuum_vacuum_cost_delay = 0);
CREATE INDEX skiplock_jobs_live_s17_pending_idx ON {s}.skiplock_jobs_live_s17 (priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_live_s17_queue_pending_idx ON {s}.skiplock_jobs_live_s17 (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_live_s17_lease_idx ON {s}.skiplock_jobs_live_s17 (lease_expires_at) WHERE state = 'running';
CREATE INDEX skiplock_jobs_live_s17_reclaimed_idx ON {s}.skiplock_jobs_live_s17 (reclaimed_at) WHERE reclaimed_at IS NOT NULL;
ALTER TABLE {s}.skiplock_jobs_live ATTACH PARTITION {s}.skiplock_jobs_live_s17_p FOR VALUES IN (17);
ALTER TABLE {s}.skiplock_jobs ALTER COLUMN segment SET DEFAULT pg_sequence_last_value('{s}.skiplock_live_segment'::regclass)::smallint;
-- A row that comes back to the live jobs from another partition (a resume, a release, a
-- person's retry, your own UPDATE) carries the segment it had when it left, whose generation
-- may be long gone: it goes to the newest one (a keyed job to the keyed segment, as before).
CREATE FUNCTION {s}.skiplock_segment_back() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.segment := pg_sequence_last_value('{s}.skiplock_live_segment'::regclass)::smallint;
    RETURN NEW;
END
$$;
CREATE TRIGGER skiplock_segment_back BEFORE UPDATE ON {s}.skiplock_jobs_waiting FOR EACH ROW
    WHEN (NEW.state IN ('pending', 'running') AND NEW.segment <> 4)
    EXECUTE FUNCTION {s}.skiplock_segment_back();
CREATE TRIGGER skiplock_segment_back BEFORE UPDATE ON {s}.skiplock_jobs_dead FOR EACH ROW
    WHEN (NEW.state IN ('pending', 'running') AND NEW.segment <> 4)
    EXECUTE FUNCTION {s}.skiplock_segment_back();
CREATE TRIGGER skiplock_segment_back BEFORE UPDATE ON {s}.skiplock_jobs_done FOR EACH ROW
    WHEN (NEW.state IN ('pending', 'running') AND NEW.segment <> 4)
    EXECUTE FUNCTION {s}.skiplock_segment_back();
UPDATE {s}.skiplock_jobs_live SET segment = 3 WHERE segment IN (0, 1, 2);
DROP TABLE {s}.skiplock_jobs_live_s0, {s}.skiplock_jobs_live_s1, {s}.skiplock_jobs_live_s2;
