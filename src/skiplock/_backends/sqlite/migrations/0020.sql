-- migration: worker liveness

-- What tells a dead worker's registry row from a live one's (see PostgreSQL's migration 20)
ALTER TABLE skiplock_workers ADD COLUMN gone_after_s REAL;
ALTER TABLE skiplock_workers ADD COLUMN process TEXT;
ALTER TABLE skiplock_workers ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE skiplock_workers ADD COLUMN restarts_in_a_row INTEGER NOT NULL DEFAULT 0
