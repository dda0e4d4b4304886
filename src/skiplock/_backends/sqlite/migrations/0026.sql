-- migration: batch pruned members

ALTER TABLE skiplock_batches ADD COLUMN pruned_members INTEGER NOT NULL DEFAULT 0
