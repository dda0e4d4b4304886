-- migration: worker liveness

-- What tells a dead worker's registry row from a live one's (``_observe/liveness.py``): the
-- silence after which it counts as gone (its own beat interval decides, not the reader's);
-- which OS process beat (boot id, pid namespace, pid, start time: a worker on the same
-- machine sees that process is gone, and a reused pid is told apart); and how often its
-- supervisor restarted it after crashes, in all and in a row. Nullable or constant
-- defaults: rows of running older workers keep the old rules.
ALTER TABLE {s}.skiplock_workers ADD COLUMN gone_after_s double precision;
ALTER TABLE {s}.skiplock_workers ADD COLUMN process text;
ALTER TABLE {s}.skiplock_workers ADD COLUMN restarts integer NOT NULL DEFAULT 0;
ALTER TABLE {s}.skiplock_workers ADD COLUMN restarts_in_a_row integer NOT NULL DEFAULT 0;
