-- migration: health numbers and worker registry

-- What the health numbers (``app.stats()``) need of a job row: when its last claim found it
-- ready (claim latency = attempted_at - ready_at), how long its last attempt ran by its
-- worker's clock, how often its lease expired and when last. Nullable or constant defaults:
-- adding them rewrites no row of a populated table.
ALTER TABLE {s}.skiplock_jobs ADD COLUMN ready_at timestamptz;
ALTER TABLE {s}.skiplock_jobs ADD COLUMN run_s double precision;
ALTER TABLE {s}.skiplock_jobs ADD COLUMN reclaims integer NOT NULL DEFAULT 0;
ALTER TABLE {s}.skiplock_jobs ADD COLUMN reclaimed_at timestamptz;
-- Only reclaimed rows enter it (rare), so the reclaim count of a window never reads history.
CREATE INDEX skiplock_jobs_reclaimed_idx ON {s}.skiplock_jobs (reclaimed_at)
    WHERE reclaimed_at IS NOT NULL;
-- Live workers, upserted by each on its maintenance beat and pruned when long silent.
CREATE TABLE {s}.skiplock_workers (
    id            text PRIMARY KEY,
    name          text NOT NULL,
    host          text NOT NULL,
    pid           integer NOT NULL,
    queues        text,
    concurrency   integer NOT NULL,
    running       integer NOT NULL DEFAULT 0,
    processed     bigint NOT NULL DEFAULT 0,
    started_at    timestamptz NOT NULL DEFAULT now(),
    heartbeat_at  timestamptz NOT NULL DEFAULT now(),
    last_claim_at timestamptz
);
