-- name: LIVE_IN_SIGHT
-- The generations' tables a new query of the job table reads (storage/sight.py): each attached
-- to its wrapper and the wrapper to the live partition, no detach pending on either. A catalog
-- read of a few rows, made when the rotation has moved the pointer (and every 30 s).
SELECT t.relname
FROM pg_inherits w
JOIN pg_inherits g ON g.inhparent = w.inhrelid
JOIN pg_class t ON t.oid = g.inhrelid
WHERE w.inhparent = '{s}.skiplock_jobs_live'::regclass
  AND NOT w.inhdetachpending AND NOT g.inhdetachpending AND t.relkind = 'r'
