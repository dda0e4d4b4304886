-- migration: workflow sequences

-- Steps keyed by occurrence, signals queued per name (a mailbox), the entry a parked wait
-- waits for, and a batch whose block raised (postgres_workflow_sql.py). Rows written before
-- are the first of their name.
ALTER TABLE {s}.skiplock_steps ADD COLUMN seq integer NOT NULL DEFAULT 1;
ALTER TABLE {s}.skiplock_steps DROP CONSTRAINT skiplock_steps_pkey;
ALTER TABLE {s}.skiplock_steps ADD PRIMARY KEY (job_id, name, seq);
ALTER TABLE {s}.skiplock_signals ADD COLUMN seq integer NOT NULL DEFAULT 1;
ALTER TABLE {s}.skiplock_signals DROP CONSTRAINT skiplock_signals_pkey;
ALTER TABLE {s}.skiplock_signals ADD PRIMARY KEY (job_id, name, seq);
ALTER TABLE {s}.skiplock_waits ADD COLUMN signal_seq integer;
ALTER TABLE {s}.skiplock_batches ADD COLUMN aborted_at timestamptz;
