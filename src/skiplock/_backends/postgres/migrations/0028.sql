-- migration: lanes

-- Every job carries a lane (docs/design.md "Every job carries a lane"): a short name, 'default'
-- in a database no directory shares out. A constant default: no row is rewritten, and every
-- partition (the live generations and their wrappers, the long and keyed segments, the
-- history, dead and waiting partitions) takes the column from the job table. Every statement
-- a claim, an outcome, a release, a heartbeat or a reclaim runs names its lane by equality, so
-- the claim and lease indexes lead with it: one lane's slice of each, in claim order.
ALTER TABLE {s}.skiplock_jobs ADD COLUMN lane text NOT NULL DEFAULT 'default';
-- The live partition's claim and lease indexes, replaced (not added to): each leaf's own under
-- the name the generations' DDL gives it (storage/queries/generations.sql), then the parent's,
-- which adopts them (and makes the wrappers' own).
DROP INDEX {s}.skiplock_jobs_pending_idx;
DROP INDEX {s}.skiplock_jobs_queue_pending_idx;
DROP INDEX {s}.skiplock_jobs_lease_idx;
DO $$
DECLARE
    leaf text;
BEGIN
    FOR leaf IN
        SELECT c.relname FROM pg_partition_tree('{s}.skiplock_jobs_live'::regclass) t
        JOIN pg_class c ON c.oid = t.relid WHERE t.isleaf ORDER BY 1
    LOOP
        EXECUTE format('CREATE INDEX %I ON {s}.%I (lane, priority DESC, run_at, id) WHERE state = ''pending''',
                       leaf || '_pending_idx', leaf);
        EXECUTE format('CREATE INDEX %I ON {s}.%I (lane, queue, priority DESC, run_at, id) WHERE state = ''pending''',
                       leaf || '_queue_pending_idx', leaf);
        EXECUTE format('CREATE INDEX %I ON {s}.%I (lane, lease_expires_at) WHERE state = ''running''',
                       leaf || '_lease_idx', leaf);
    END LOOP;
END
$$;
CREATE INDEX skiplock_jobs_pending_idx ON {s}.skiplock_jobs_live (lane, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_queue_pending_idx ON {s}.skiplock_jobs_live (lane, queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_lease_idx ON {s}.skiplock_jobs_live (lane, lease_expires_at) WHERE state = 'running';
-- The keyed claim's walk: one lane's keys, each key's jobs in claim order.
DROP INDEX {s}.skiplock_jobs_live_keyed_walk_idx;
CREATE INDEX skiplock_jobs_live_keyed_walk_idx ON {s}.skiplock_jobs_live_keyed
    (lane, queue, concurrency_key, priority DESC, run_at, id) WHERE state = 'pending';
-- The keyed claim's walk and its count of a key's running jobs, in one lane (migration 13's,
-- each read naming the lane).
DROP FUNCTION {s}.skiplock_key_walk(text, text, text[], integer);
CREATE FUNCTION {s}.skiplock_key_walk(after_q text, after_k text, queues text[], n integer, lane_ text)
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
            WHERE j.lane = lane_ AND j.state = 'pending' AND (j.queue, j.concurrency_key) > (cq, ck)
            ORDER BY j.queue, j.concurrency_key LIMIT 1;
        ELSE
            SELECT x.name, x.key INTO nq, nk FROM (
                SELECT u.name, (SELECT min(j.concurrency_key) FROM {s}.skiplock_jobs_live_keyed j
                                WHERE j.lane = lane_ AND j.state = 'pending' AND j.queue = u.name
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
CREATE FUNCTION {s}.skiplock_key_running(k text, lane_ text) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('skiplock_key:{s}'), hashtext(k)) THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT count(*) FROM {s}.skiplock_jobs
            WHERE lane = lane_ AND state = 'running' AND segment = 4 AND concurrency_key = k);
END
$$;
-- The keyed claim, of one lane ($12): migration 22's, each read of a job table naming it.
DROP FUNCTION {s}.skiplock_keyed_claim(text[], integer, text, text, double precision,
    double precision, timestamptz, boolean, text, text, integer);

CREATE FUNCTION {s}.skiplock_keyed_claim(text[], integer, text, text, double precision,
    double precision, timestamptz, boolean, text, text, integer, text)
RETURNS TABLE (id bigint, task text, queue text, args text, kwargs text, priority integer,
    attempt integer, max_attempts integer, timeout double precision, lease_token text,
    created_at timestamptz, lease_expires_at timestamptz, lease_s double precision,
    correlation_id text, trace_context text, payload_version integer, segment smallint,
    lane text, key text, place bigint, next_queue text, next_key text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan
    SET enable_bitmapscan = off SET enable_seqscan = off SET jit = off AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
-- Claim up to $2 ready keyed jobs of the queues in $1 (NULL: any) for worker $3 under token
-- $4 (leases as the ordinary claim: $5 default, $6 margin; $7 now), visiting at most $11
-- (queue, key) pairs after the cursor ($9, $10; NULL: from the first). $8: a limited queue's
-- own claim, under its settings row's lock (otherwise limited queues are left to it). Rows:
-- each job claimed with its key, in the claim's order (place), and in every row where the
-- next walk starts (next_queue, next_key; NULL: from the first); one row of NULLs but those
-- when nothing was claimed. $12: the lane, named by equality in every read of a job table.
WITH RECURSIVE now_ AS (SELECT coalesce($7::timestamptz, now()) AS t),
scan AS MATERIALIZED (
    -- every queue served: the walk index's next 2 x $11 entries after the cursor, in its
    -- order (one descent, then leaf by leaf: many keys of a job or two, a key an entry),
    -- each with its key's place and its own within the key
    SELECT e.*, dense_rank() OVER (ORDER BY e.q, e.k) AS pos,
           row_number() OVER (PARTITION BY e.q, e.k
                              ORDER BY e.priority DESC, e.run_at, e.id) AS nth
    FROM (
        SELECT j.queue AS q, j.concurrency_key AS k, j.id, j.priority, j.run_at, j.task, j.key_limit, j.key_weight, j.key_order FROM {s}.skiplock_jobs_live_keyed j
        WHERE $1 IS NULL AND j.lane = $12 AND j.state = 'pending'
          AND (j.queue, j.concurrency_key) > (coalesce($9, ''), coalesce($10, ''))
        ORDER BY j.queue, j.concurrency_key, j.priority DESC, j.run_at, j.id
        LIMIT 2 * $11
    ) e
),
scanned AS MATERIALIZED (
    -- each key the scan met: its first entry's limit, weight and order, its first $2 entries
    SELECT q, k, pos, max(key_limit) FILTER (WHERE nth = 1) AS key_limit,
           max(key_weight) FILTER (WHERE nth = 1) AS key_weight,
           max(key_order) FILTER (WHERE nth = 1) AS key_order,
           array_agg(ROW(id, priority, run_at, task)) FILTER (WHERE nth <= $2) AS entries
    FROM scan GROUP BY q, k, pos
),
fast AS MATERIALIZED (
    -- the scan holds the first $11 keys whole (a key began after them): they are the walk
    SELECT coalesce(max(pos) > $11, false) AS yes FROM scanned
),
round AS (
    -- else a loose scan of the walk index (a probe a pair) after the cursor, then from the
    -- first again up to it: a key's backlog is stepped over, however long
    SELECT n.q, n.k, n.lap, 1 AS pos, id, priority, run_at, task, key_limit, key_weight, key_order FROM (
        (SELECT x.*, 0 AS lap FROM (SELECT j.queue AS q, j.concurrency_key AS k, j.id, j.priority, j.run_at, j.task, j.key_limit, j.key_weight, j.key_order FROM {s}.skiplock_jobs_live_keyed j
            WHERE j.lane = $12 AND j.state = 'pending' AND (j.queue, j.concurrency_key) > (coalesce($9, ''), coalesce($10, ''))
            ORDER BY j.queue, j.concurrency_key, j.priority DESC, j.run_at, j.id LIMIT 1) x)
        UNION ALL
        (SELECT x.*, 1 FROM (SELECT j.queue AS q, j.concurrency_key AS k, j.id, j.priority, j.run_at, j.task, j.key_limit, j.key_weight, j.key_order FROM {s}.skiplock_jobs_live_keyed j
            WHERE j.lane = $12 AND j.state = 'pending' AND (j.queue, j.concurrency_key) > ('', '')
            ORDER BY j.queue, j.concurrency_key, j.priority DESC, j.run_at, j.id LIMIT 1) x WHERE $10 IS NOT NULL)
        LIMIT 1
    ) n
    WHERE $1 IS NULL AND NOT (SELECT yes FROM fast) AND (n.lap = 0 OR (n.q, n.k) <= ($9, $10))
    UNION ALL
    SELECT n.q, n.k, n.lap, r.pos + 1, n.id, n.priority, n.run_at, n.task, n.key_limit, n.key_weight, n.key_order
    FROM round r CROSS JOIN LATERAL (
        (SELECT x.*, r.lap FROM (SELECT j.queue AS q, j.concurrency_key AS k, j.id, j.priority, j.run_at, j.task, j.key_limit, j.key_weight, j.key_order FROM {s}.skiplock_jobs_live_keyed j
            WHERE j.lane = $12 AND j.state = 'pending' AND (j.queue, j.concurrency_key) > (r.q, r.k)
            ORDER BY j.queue, j.concurrency_key, j.priority DESC, j.run_at, j.id LIMIT 1) x)
        UNION ALL
        (SELECT x.*, 1 FROM (SELECT j.queue AS q, j.concurrency_key AS k, j.id, j.priority, j.run_at, j.task, j.key_limit, j.key_weight, j.key_order FROM {s}.skiplock_jobs_live_keyed j
            WHERE j.lane = $12 AND j.state = 'pending' AND (j.queue, j.concurrency_key) > ('', '')
            ORDER BY j.queue, j.concurrency_key, j.priority DESC, j.run_at, j.id LIMIT 1) x WHERE r.lap = 0 AND $10 IS NOT NULL)
        LIMIT 1
    ) n
    WHERE r.pos < $11 AND (n.lap = 0 OR (n.q, n.k) <= ($9, $10))
),
walk AS MATERIALIZED (
    -- each visited pair, its first pending job's limit, weight and order, and the scan's
    -- entries of the keys it held whole
    SELECT q, k, pos, key_limit, key_weight, key_order, entries
    FROM scanned WHERE pos <= $11 AND (SELECT yes FROM fast)
    UNION ALL
    SELECT q, k, pos, key_limit, key_weight, key_order, NULL FROM round
    UNION ALL
    -- queues named: each named queue's keys alone (skiplock_key_walk), then a probe a key
    SELECT w.q, w.k, w.pos, f.key_limit, f.key_weight, f.key_order, NULL
    FROM {s}.skiplock_key_walk($9::text, $10::text, $1::text[], $11, $12::text) w
    CROSS JOIN LATERAL (
        SELECT j.key_limit, j.key_weight, j.key_order FROM {s}.skiplock_jobs_live_keyed j
        WHERE j.lane = $12 AND j.state = 'pending' AND j.queue = w.q AND j.concurrency_key = w.k
        ORDER BY j.priority DESC, j.run_at, j.id LIMIT 1
    ) f
    WHERE $1 IS NOT NULL
),
keys AS MATERIALIZED (
    -- each visited key as its first pending job says: its limit, weight, order; locked (NULL
    -- running: another claimer holds it, skip it), and only when it has a limit its running
    -- jobs counted after the lock (skiplock_key_running); its pass and its last advance
    SELECT w.q, w.k, w.pos, w.key_limit AS lim, coalesce(w.key_weight, 1) AS wt,
           w.key_order AS ordered, w.entries,
           CASE WHEN w.key_limit IS NULL
                THEN CASE WHEN pg_try_advisory_xact_lock(hashtext('skiplock_key:{s}'),
                                                         hashtext(w.k)) THEN 0 END
                ELSE {s}.skiplock_key_running(w.k, $12::text) END AS running,
           (SELECT t.pass FROM {s}.skiplock_key_turns t WHERE t.concurrency_key = w.k) AS pass
    FROM walk w
    -- paused queues never; limited queues only through their own locked claim ($8)
    WHERE w.q NOT IN (SELECT name FROM {s}.skiplock_queues
                      WHERE paused OR (NOT $8 AND (max_running IS NOT NULL
                                                   OR rate_per_s IS NOT NULL)))
),
lifted AS MATERIALIZED (
    -- each key's pass, at least one turn below the highest the claim visits
    SELECT k.q, k.k, k.pos, k.lim, k.ordered, k.running, k.entries,
           greatest(coalesce(k.pass, 0), m.low) AS pass,
           CASE WHEN k.wt = 0 THEN 0 ELSE 720720 / k.wt END AS stride
    FROM keys k,
         (SELECT greatest(0, (coalesce(max(pass), 0) / 720720 - 1) * 720720) AS low FROM keys) m
    WHERE k.running IS NOT NULL
),
jobs AS (
    -- each key's ready jobs: a key the scan held whole, its entries there; another, its first
    -- $2 read by a probe; an ordered key, its head alone (its live job of the lowest id) if it
    -- is pending, due, and behind no dead job that blocks the key and no job parked on a
    -- signal
    SELECT s.id, s.priority, s.run_at, k.q, k.k, k.pos, k.lim, k.running, k.pass, k.stride
    FROM lifted k
    CROSS JOIN LATERAL unnest(k.entries) AS s(id bigint, priority integer, run_at timestamptz,
                                              task text)
    WHERE k.entries IS NOT NULL AND k.ordered IS NULL
      AND s.run_at <= (SELECT t FROM now_) AND s.task NOT IN (SELECT task FROM {s}.skiplock_task_pauses
                           WHERE until IS NULL OR until > (SELECT t FROM now_))
    UNION ALL
    SELECT c.id, c.priority, c.run_at, k.q, k.k, k.pos, k.lim, k.running, k.pass, k.stride
    FROM lifted k CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM {s}.skiplock_jobs
        WHERE lane = $12 AND state = 'pending' AND segment = 4
          AND queue = k.q AND concurrency_key = k.k AND run_at <= (SELECT t FROM now_)
          AND task NOT IN (SELECT task FROM {s}.skiplock_task_pauses
                           WHERE until IS NULL OR until > (SELECT t FROM now_))
        ORDER BY priority DESC, run_at, id
        LIMIT $2
    ) c
    WHERE k.entries IS NULL AND k.ordered IS NULL
    UNION ALL
    SELECT h.id, h.priority, h.run_at, k.q, k.k, k.pos, k.lim, k.running, k.pass, k.stride
    FROM lifted k CROSS JOIN LATERAL (
        SELECT id, priority, run_at, state, queue, task FROM {s}.skiplock_jobs
        WHERE lane = $12 AND state IN ('pending', 'running') AND segment = 4
          AND concurrency_key = k.k
        ORDER BY id LIMIT 1
    ) h
    WHERE k.ordered IS NOT NULL
      AND h.state = 'pending' AND h.queue = k.q AND h.run_at <= (SELECT t FROM now_)
      AND h.task NOT IN (SELECT task FROM {s}.skiplock_task_pauses
                           WHERE until IS NULL OR until > (SELECT t FROM now_))
      AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs d
                  WHERE d.lane = $12 AND d.state = 'dead' AND d.key_order = 'block'
                    AND d.concurrency_key = k.k AND d.id < h.id)
      AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs p JOIN {s}.skiplock_waits pw ON pw.job_id = p.id
                  WHERE p.lane = $12 AND p.state = 'waiting' AND p.key_order IS NOT NULL
                    AND p.concurrency_key = k.k AND p.id < h.id
                    AND pw.signal IS NOT NULL)
),
cand AS MATERIALIZED (
    SELECT j.*, row_number() OVER w AS rank, count(*) OVER (PARTITION BY j.k) AS ready
    FROM jobs j
    WINDOW w AS (PARTITION BY j.k ORDER BY j.priority DESC, j.run_at, j.id)
),
roomy AS MATERIALIZED (
    -- within each key's room, each job's turn (a fair=False key's: the current one)
    SELECT c.*, CASE WHEN c.stride = 0 THEN now_turn.t
                     ELSE (c.pass + (c.rank - 1) * c.stride) / 720720 END AS turn
    FROM cand c, (SELECT coalesce(min(pass / 720720), 0) AS t FROM cand
                  WHERE stride > 0 AND rank = 1 AND (lim IS NULL OR running < lim)) now_turn
    WHERE c.lim IS NULL OR c.rank <= c.lim - c.running
),
picked AS MATERIALIZED (
    -- priority first, then the turn, then age (place: the order the worker starts them in)
    SELECT id, k, row_number() OVER (ORDER BY priority DESC, turn, run_at, id) AS place
    FROM roomy ORDER BY priority DESC, turn, run_at, id LIMIT $2
),
c AS MATERIALIZED (
    -- locked, and still pending as locked (the row's latest version), by primary key alone:
    -- state <> 'running' is pending in this table and matches no partial index's predicate
    SELECT j.id FROM {s}.skiplock_jobs_live_keyed j
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND j.lane = $12 AND j.state <> 'running'
    FOR UPDATE SKIP LOCKED
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
WHERE j.id = ANY(ARRAY(SELECT id FROM c)) AND j.lane = $12
RETURNING j.id, j.task, j.queue, j.args::text AS args, j.kwargs::text AS kwargs, j.priority,
          j.attempt, j.max_attempts, j.timeout, j.lease_token, j.created_at, j.lease_expires_at,
          coalesce(j.lease_s, coalesce(j.timeout, $5) + $6) AS lease_s, j.correlation_id,
          j.trace_context, coalesce(j.payload_version, 1) AS payload_version, j.segment, j.lane, j.concurrency_key AS key
),
took AS MATERIALIZED (
    -- each visited key: how many jobs the claim took, its pass once it took them, and how
    -- many ready jobs it read
    SELECT k.k, k.pos, k.lim, k.running, k.stride, coalesce(n.n, 0) AS n,
           k.pass + coalesce(n.n, 0) * k.stride AS pass, coalesce(r.ready, 0) AS ready
    FROM lifted k
    LEFT JOIN (SELECT p.k, count(*) AS n FROM picked p JOIN c ON c.id = p.id GROUP BY p.k) n
           ON n.k = k.k
    LEFT JOIN (SELECT k, pos, max(ready) AS ready FROM cand GROUP BY k, pos) r
           ON r.k = k.k AND r.pos = k.pos
),
turned AS (
    -- the advance of each weighted key it took from: onto the row's latest version (a claim
    -- that committed since this one's snapshot is not undone), lifted as read
    INSERT INTO {s}.skiplock_key_turns AS t (concurrency_key, pass, step)
    SELECT DISTINCT ON (k) k, pass, n * stride FROM took
    WHERE n > 0 AND stride > 0 ORDER BY k, pass DESC
    ON CONFLICT (concurrency_key) DO UPDATE
    SET pass = greatest(t.pass + excluded.step, excluded.pass), step = excluded.step
),
started AS (
    -- the first visited key (walk order) still with work in the turn this claim started in:
    -- a job it read and did not take, or as many as it read ($2, so maybe more), and room
    SELECT min(o.pos) AS pos FROM took o
    WHERE o.stride > 0 AND o.pass / 720720 = (SELECT min(turn) FROM roomy WHERE stride > 0)
      AND (o.lim IS NULL OR o.lim - o.running > o.n) AND (o.ready > o.n OR o.ready >= $2)
),
next_ AS (
    SELECT CASE WHEN s.pos = 1 THEN $9::text WHEN s.pos > 1 THEN b.q
                ELSE (SELECT q FROM walk WHERE pos = $11) END AS q,
           CASE WHEN s.pos = 1 THEN $10::text WHEN s.pos > 1 THEN b.k
                ELSE (SELECT k FROM walk WHERE pos = $11) END AS k
    FROM started s LEFT JOIN walk b ON b.pos = s.pos - 1
)
SELECT r.*, p.place, n.q AS next_queue, n.k AS next_key
FROM next_ n LEFT JOIN claimed r ON true LEFT JOIN picked p ON p.id = r.id
ORDER BY p.place;
END
$$;
