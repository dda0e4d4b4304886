-- migration: cron slots

-- One row per (schedule, slot) ever claimed: the unique key is what makes a slot run once.
CREATE TABLE skiplock_cron_slots (
    schedule   TEXT NOT NULL,
    slot       REAL NOT NULL,
    job_id     INTEGER,
    skipped    INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    PRIMARY KEY (schedule, slot)
);
