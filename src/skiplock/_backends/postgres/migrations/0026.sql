-- migration: batch pruned members

-- A batch counts its members the retention pruned (their skiplock_batch_jobs rows go with
-- their jobs), so its counts keep every member it ever had, those as 'gone'. A constant
-- default: no row is rewritten; members pruned before this migration are not known.
ALTER TABLE {s}.skiplock_batches ADD COLUMN pruned_members bigint NOT NULL DEFAULT 0;
