-- migration: cron slots

-- One row per (schedule, slot) ever claimed: the unique key is what makes a slot run once.
CREATE TABLE {s}.skiplock_cron_slots (
    schedule   text NOT NULL,
    slot       timestamptz NOT NULL,
    job_id     bigint,
    skipped    boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule, slot)
);
