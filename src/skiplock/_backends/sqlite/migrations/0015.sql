-- migration: key weights

-- Weighted turns (key_weight=, fair=False: 0): how many jobs a key takes each turn.
ALTER TABLE skiplock_jobs_live ADD COLUMN key_weight INTEGER CHECK (key_weight >= 0)
