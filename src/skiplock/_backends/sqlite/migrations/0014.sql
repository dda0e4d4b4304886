-- migration: priority aging

-- Priority aging (sqlite_aging_sql.py): a queue's aging step in seconds, NULL for none.
ALTER TABLE skiplock_queues ADD COLUMN aging_s REAL CHECK (aging_s > 0 AND aging_s <= 2592000)
