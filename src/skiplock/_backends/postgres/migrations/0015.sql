-- migration: priority aging

-- Priority aging (postgres_aging_sql.py): a queue's aging step in seconds, NULL for none.
-- Nullable without a default: adding it rewrites no row.
ALTER TABLE {s}.skiplock_queues ADD COLUMN aging_s double precision
    CHECK (aging_s > 0 AND aging_s <= 2592000);
