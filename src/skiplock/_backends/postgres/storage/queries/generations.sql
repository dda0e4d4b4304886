-- name: GENERATION_WRAPPER
-- A generation's wrapper, made apart from the job table (a CREATE ... PARTITION OF the
-- live partition would take its ACCESS EXCLUSIVE lock): the partitioned table its table is
-- attached under, and which is attached to the live partition last (GENERATION_ATTACH).
CREATE TABLE {s}.{wrapper} (LIKE {s}.skiplock_jobs_live INCLUDING CONSTRAINTS) PARTITION BY LIST (segment)

-- name: GENERATION_TABLE
-- A generation's table (its rows), vacuumed and analyzed eagerly (its own settings).
CREATE TABLE {s}.{table} PARTITION OF {s}.{wrapper} (PRIMARY KEY (id)) FOR VALUES IN ({segment}) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,
          autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
          autovacuum_vacuum_cost_delay = 0)

-- name: GENERATION_PENDING_INDEX
-- The table's claim, lease and reclaim indexes, named after it and made before the attach:
-- the live partition's own indexes take these as theirs (each claim and lease index leads
-- with the lane: migration 28).
CREATE INDEX {pending_idx} ON {s}.{table} (lane, priority DESC, run_at, id) WHERE state = 'pending'

-- name: GENERATION_QUEUE_PENDING_INDEX
CREATE INDEX {queue_pending_idx} ON {s}.{table} (lane, queue, priority DESC, run_at, id) WHERE state = 'pending'

-- name: GENERATION_LEASE_INDEX
CREATE INDEX {lease_idx} ON {s}.{table} (lane, lease_expires_at) WHERE state = 'running'

-- name: GENERATION_RECLAIMED_INDEX
CREATE INDEX {reclaimed_idx} ON {s}.{table} (reclaimed_at) WHERE reclaimed_at IS NOT NULL

-- name: GENERATION_ATTACH
-- The attach: the live partition's checks and triggers reach the generation here, and its
-- indexes adopt the table's own.
ALTER TABLE {s}.skiplock_jobs_live ATTACH PARTITION {s}.{wrapper} FOR VALUES IN ({segment})
