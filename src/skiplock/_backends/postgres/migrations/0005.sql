-- migration: started mark

-- When a running job's code started, as its worker's heartbeat reports it (NULL while it is
-- only claimed ahead: prefetched, leased, not started). The claim clears it.
ALTER TABLE {s}.skiplock_jobs ADD COLUMN started_at timestamptz;
