-- migration: concurrency keys

-- Concurrency keys (postgres_keys_sql.py, docs/design.md "Concurrency keys"). The columns are
-- nullable without a default: adding them rewrites no row.
ALTER TABLE {s}.skiplock_jobs ADD COLUMN concurrency_key text;
ALTER TABLE {s}.skiplock_jobs ADD COLUMN key_limit integer CHECK (key_limit >= 1);
-- An ordered key (ordering_key=): its jobs one at a time in id order; 'block': a dead one
-- holds the key until a person retries or discards it, 'skip': the next one runs.
ALTER TABLE {s}.skiplock_jobs ADD COLUMN key_order text CHECK (key_order IN ('block', 'skip'));
CREATE TABLE {s}.skiplock_jobs_live_keyed PARTITION OF {s}.skiplock_jobs_live
    (PRIMARY KEY (id)) FOR VALUES IN (4)
    WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,
          autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
          autovacuum_vacuum_cost_delay = 0);
-- The claim's walk: the keys with pending jobs, each key's jobs in claim order.
CREATE INDEX skiplock_jobs_live_keyed_walk_idx ON {s}.skiplock_jobs_live_keyed
    (queue, concurrency_key, priority DESC, run_at, id) WHERE state = 'pending';
-- A key's running jobs, counted by every claim of it.
CREATE INDEX skiplock_jobs_live_keyed_running_idx ON {s}.skiplock_jobs_live_keyed
    (concurrency_key) WHERE state = 'running';
-- An ordered key's head: its live job of the lowest id.
CREATE INDEX skiplock_jobs_live_keyed_head_idx ON {s}.skiplock_jobs_live_keyed
    (concurrency_key, id) WHERE state IN ('pending', 'running');
-- The dead jobs that hold their ordered keys.
CREATE INDEX skiplock_jobs_dead_blocking_idx ON {s}.skiplock_jobs_dead (concurrency_key, id)
    WHERE key_order = 'block';
-- Keyed jobs in the keyed segment and nowhere else: the ordinary claims never read it.
ALTER TABLE {s}.skiplock_jobs_live ADD CONSTRAINT skiplock_jobs_keyed_segment
    CHECK ((concurrency_key IS NULL) = (segment <> 4));
-- An ordered job has a key, and runs alone (checked where jobs are written: the live rows).
ALTER TABLE {s}.skiplock_jobs_live ADD CONSTRAINT skiplock_jobs_key_order
    CHECK (key_order IS NULL OR (concurrency_key IS NOT NULL AND key_limit = 1));
-- The keyed claim's walk: the first n (queue, key) pairs with pending keyed jobs after the
-- cursor (after_q, after_k; NULL: from the first), in the queues named (NULL: any), then from
-- the first pair again up to the cursor: one probe of the walk index a pair (a loose index
-- scan), one a served queue when some are named (another queue's keys are never read). Its
-- probes name the keyed segment's table (through the partitioned table the row comparison
-- is not an index condition: a probe read the queue's whole backlog and sorted it, 46 ms of
-- 100,000 rows), and its settings keep them on the walk index whatever the statistics say
-- (planned from a segment loaded since its last ANALYZE, a bitmap of the backlog: 1.6 s a
-- claim, measured).
CREATE FUNCTION {s}.skiplock_key_walk(after_q text, after_k text, queues text[], n integer)
RETURNS TABLE (q text, k text, pos integer)
LANGUAGE plpgsql STABLE SET enable_bitmapscan = off SET enable_seqscan = off AS $$
DECLARE
    cq text := coalesce(after_q, '');
    ck text := coalesce(after_k, '');
    lap integer := 0;
    nq text;
    nk text;
BEGIN
    pos := 0;
    WHILE pos < n LOOP
        nq := NULL;
        nk := NULL;
        IF queues IS NULL THEN
            SELECT j.queue, j.concurrency_key INTO nq, nk FROM {s}.skiplock_jobs_live_keyed j
            WHERE j.state = 'pending' AND (j.queue, j.concurrency_key) > (cq, ck)
            ORDER BY j.queue, j.concurrency_key LIMIT 1;
        ELSE
            SELECT x.name, x.key INTO nq, nk FROM (
                SELECT u.name, (SELECT min(j.concurrency_key) FROM {s}.skiplock_jobs_live_keyed j
                                WHERE j.state = 'pending' AND j.queue = u.name
                                  AND j.concurrency_key > CASE WHEN u.name = cq THEN ck
                                                               ELSE '' END) AS key
                FROM unnest(queues) AS u(name) WHERE u.name >= cq
            ) x
            WHERE x.key IS NOT NULL ORDER BY x.name LIMIT 1;
        END IF;
        IF nq IS NULL THEN
            EXIT WHEN lap = 1 OR after_k IS NULL;
            lap := 1;  -- past the last pair: round again from the first, up to the cursor
            cq := '';
            ck := '';
            CONTINUE;
        END IF;
        EXIT WHEN lap = 1 AND (nq, nk) > (after_q, after_k);
        pos := pos + 1;
        q := nq;
        k := nk;
        RETURN NEXT;
        cq := nq;
        ck := nk;
    END LOOP;
END
$$;
-- NULL when another transaction holds the key's lock; else, under that lock (released at the
-- end of the caller's transaction), how many of the key's jobs run now, read in a snapshot
-- of this statement's own.
CREATE FUNCTION {s}.skiplock_key_running(k text) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('skiplock_key:{s}'), hashtext(k)) THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT count(*) FROM {s}.skiplock_jobs
            WHERE state = 'running' AND segment = 4 AND concurrency_key = k);
END
$$;

-- The keyed claim (postgres_keys_sql.keyed_claim), its arguments in JOB_GET_AVAILABLE_KEYED's
-- order; its plan made once per session.
CREATE FUNCTION {s}.skiplock_keyed_claim(text[], integer, text, text, double precision,
    double precision, timestamptz, boolean, text, text, integer)
RETURNS TABLE (id bigint, task text, queue text, args text, kwargs text, priority integer,
    attempt integer, max_attempts integer, timeout double precision, lease_token text,
    created_at timestamptz, lease_expires_at timestamptz, lease_s double precision,
    correlation_id text, trace_context text, payload_version integer, segment smallint,
    key text, pos integer, walked_queue text, walked_key text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
-- Claim up to $2 ready keyed jobs of the queues in $1 (NULL: any) for worker $3 under token
-- $4 (leases as the ordinary claim: $5 default, $6 margin; $7 now), visiting at most $11
-- (queue, key) pairs after the cursor ($9, $10; NULL: from the first). $8: a limited queue's
-- own claim, under its settings row's lock (otherwise limited queues are left to it). Rows:
-- each job claimed with its key and the key's place in the walk, and in every row the last
-- pair visited when the walk went its whole length (NULL: it reached the end, start over);
-- one row of NULLs but those when nothing was claimed.
WITH now_ AS (SELECT coalesce($7::timestamptz, now()) AS t),
walk AS MATERIALIZED (
    -- the pairs to visit in turn (skiplock_key_walk: after the cursor, then round again)
    SELECT q, k, pos FROM {s}.skiplock_key_walk($9::text, $10::text, $1::text[], $11)
),
keys AS MATERIALIZED (
    -- each pair's key locked (NULL running: another claimer holds it, skip), then counted;
    -- whether it is an ordered key, as its first pending job says (one probe)
    SELECT q, k, pos, {s}.skiplock_key_running(k) AS running,
           (SELECT j.key_order FROM {s}.skiplock_jobs j
            WHERE j.state = 'pending' AND j.segment = 4
              AND j.queue = walk.q AND j.concurrency_key = walk.k
            ORDER BY j.priority DESC, j.run_at, j.id LIMIT 1) AS ordered
    FROM walk
),
cand AS MATERIALIZED (
    -- each key's first $2 ready jobs (a key's limit is the one its first ready job carries);
    -- an ordered key's head alone (its live job of the lowest id) if it is pending, due and
    -- not behind a dead job of its key that blocks it
    SELECT c.id, c.priority, k.k, k.pos, k.running,
           row_number() OVER w AS rank, first_value(c.key_limit) OVER w AS lim
    FROM keys k CROSS JOIN LATERAL (
        (SELECT id, priority, run_at, key_limit FROM {s}.skiplock_jobs
        WHERE state = 'pending' AND segment = 4
          AND queue = k.q AND concurrency_key = k.k AND run_at <= (SELECT t FROM now_)
          AND task NOT IN (SELECT task FROM {s}.skiplock_task_pauses
                           WHERE until IS NULL OR until > (SELECT t FROM now_))
          AND k.ordered IS NULL
        ORDER BY priority DESC, run_at, id
        LIMIT $2)
        UNION ALL
        SELECT h.id, h.priority, h.run_at, h.key_limit FROM (
            SELECT id, priority, run_at, key_limit, state, queue, task
            FROM {s}.skiplock_jobs
            WHERE state IN ('pending', 'running') AND segment = 4
              AND concurrency_key = k.k AND k.ordered IS NOT NULL
            ORDER BY id LIMIT 1
        ) h
        WHERE h.state = 'pending' AND h.queue = k.q AND h.run_at <= (SELECT t FROM now_)
          AND h.task NOT IN (SELECT task FROM {s}.skiplock_task_pauses
                             WHERE until IS NULL OR until > (SELECT t FROM now_))
          AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs d
                  WHERE d.state = 'dead' AND d.key_order = 'block'
                    AND d.concurrency_key = k.k AND d.id < h.id)
    ) c
    WHERE k.running IS NOT NULL
      -- paused queues never; limited queues only through their own locked claim ($8)
      AND k.q NOT IN (SELECT name FROM {s}.skiplock_queues
                      WHERE paused OR (NOT $8 AND (max_running IS NOT NULL
                                                   OR rate_per_s IS NOT NULL)))
    WINDOW w AS (PARTITION BY k.k ORDER BY c.priority DESC, c.run_at, c.id)
),
c AS MATERIALIZED (
    -- within each key's room: priority first, then the key's turn, then age; locked, and
    -- still pending as locked (the row's latest version; by primary key alone, as above)
    SELECT x.id FROM (
        SELECT j.id, j.state FROM {s}.skiplock_jobs_live_keyed j
        WHERE j.id = ANY(ARRAY(
            SELECT id FROM cand WHERE lim IS NULL OR rank <= lim - running
            ORDER BY priority DESC, rank, pos LIMIT $2))
        FOR UPDATE SKIP LOCKED
    ) x
    WHERE x.state = 'pending'
),
claimed AS (
UPDATE {s}.skiplock_jobs_live_keyed j
SET state = 'running', attempt = j.attempt + 1, attempted_at = (SELECT t FROM now_),
    ready_at = greatest(j.run_at, j.created_at),
    started_at = NULL, locked_by = $3, lease_token = $4,
    lease_expires_at = (SELECT t FROM now_)
                       + make_interval(secs => coalesce(j.lease_s, coalesce(j.timeout, $5) + $6))
-- id = ANY(ARRAY(...)) keeps the update on the primary key: joining the CTE instead lets the
-- planner hash a scan of the whole table once batches grow past ~50 rows.
-- state IN (...): the live partition alone, and no partial index's predicate (with
-- state = 'pending' the planner may walk a whole pending index for the ids)
WHERE j.id = ANY(ARRAY(SELECT id FROM c))
RETURNING j.id, j.task, j.queue, j.args::text AS args, j.kwargs::text AS kwargs, j.priority,
          j.attempt, j.max_attempts, j.timeout, j.lease_token, j.created_at, j.lease_expires_at,
          coalesce(j.lease_s, coalesce(j.timeout, $5) + $6) AS lease_s, j.correlation_id,
          j.trace_context, coalesce(j.payload_version, 1) AS payload_version, j.segment, j.concurrency_key AS key
)
SELECT r.*, (SELECT min(pos) FROM keys WHERE keys.q = r.queue AND keys.k = r.key) AS pos,
       (SELECT q FROM walk WHERE pos = $11) AS walked_queue,
       (SELECT k FROM walk WHERE pos = $11) AS walked_key
FROM (SELECT 1) AS one LEFT JOIN claimed r ON true;
END
$$;
