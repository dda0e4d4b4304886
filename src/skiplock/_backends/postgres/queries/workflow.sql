-- name: JOBS_MISSING
-- Which of the ids $1 name no job (an unknown or pruned parent).
SELECT x.id FROM unnest($1::bigint[]) AS x(id)
WHERE NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j WHERE j.id = x.id)

-- name: ANCESTORS_MEET
-- Whether any of the jobs $2 is one of $1 or an ancestor of one (a new edge from $1's
-- members to $2's would close a cycle).
WITH RECURSIVE up(id) AS (
    SELECT unnest($1::bigint[])
    UNION
    SELECT d.parent_id FROM {s}.skiplock_deps d JOIN up ON d.child_id = up.id
)
SELECT EXISTS (SELECT 1 FROM up WHERE id = ANY($2::bigint[]))

-- name: JOBS_TO_WAITING
-- Freshly inserted jobs (in this transaction, so no worker saw them) wait instead.
UPDATE {s}.skiplock_jobs SET state = 'waiting'
WHERE id = ANY($1::bigint[]) AND state = 'pending'

-- name: WAITS_INSERT
INSERT INTO {s}.skiplock_waits (job_id, parents_left, pass_results, batch_id)
SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::bigint[])

-- name: WAITS_ADD
-- More parents for waiting jobs (a batch's callbacks as members join).
UPDATE {s}.skiplock_waits w SET parents_left = w.parents_left + x.n
FROM unnest($1::bigint[], $2::int[]) AS x(id, n) WHERE w.job_id = x.id

-- name: DEPS_INSERT
INSERT INTO {s}.skiplock_deps (child_id, parent_id, position, on_failure)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[])
ON CONFLICT DO NOTHING

-- name: DEPS_RESOLVE
-- Resolve the open edges of parents $1 that finished (or are gone: pruned, discarded), each
-- once: the edges are locked first, in one order (two releases of one parent, a worker's and
-- the sweep's, never deadlock), and a second release meets them locked, then resolved, and
-- skips them. An edge whose parent failed and whose child waits for a retry ('wait') stays
-- open, until the parent is gone (pruned: no retry can come). The update finds the locked
-- rows by their ctid (stable while locked): a semi join with the locking CTE was planned as
-- a nested loop over it, 4.5 million comparisons for a fan-out of 3,000, and a join on the
-- key through the partial index read a parent's every edge.
WITH p AS (
    SELECT x.id, j.state, j.result
    FROM (SELECT DISTINCT unnest($1::bigint[]) AS id) x
    LEFT JOIN {s}.skiplock_jobs j ON j.id = x.id
), todo AS (
    SELECT d.ctid AS at, d.parent_id, coalesce(p.state, 'gone') AS state
    FROM {s}.skiplock_deps d JOIN p ON d.parent_id = p.id
    WHERE d.parent_state IS NULL
      AND (p.state IS NULL OR p.state IN ('succeeded', 'cancelled', 'dead'))
      AND (p.state IS NULL OR p.state = 'succeeded' OR d.on_failure <> 'wait')
    ORDER BY d.child_id, d.parent_id
    FOR UPDATE OF d
), kept AS (
    -- the result of a parent that succeeded, once for all its edges (run after the update,
    -- which locked every edge first: two releases meet on the edges, never here first)
    INSERT INTO {s}.skiplock_parent_results AS k (parent_id, result)
    SELECT p.id, p.result FROM p
    WHERE p.state = 'succeeded' AND p.id IN (SELECT todo.parent_id FROM todo)
    ON CONFLICT (parent_id) DO UPDATE SET result = EXCLUDED.result
    WHERE k.result IS DISTINCT FROM EXCLUDED.result
)
UPDATE {s}.skiplock_deps d
SET parent_state = todo.state, resolved_at = now()
FROM todo
WHERE d.ctid = todo.at
RETURNING d.child_id, d.parent_id, d.parent_state, d.on_failure

-- name: WAITS_DECREMENT
-- Count resolved parents off; the children that reach zero come back (each wait row locked
-- first, in id order: two releases of one child decrement one after the other, and exactly
-- one of them sees zero).
WITH locked AS (
    SELECT w.job_id, x.n
    FROM {s}.skiplock_waits w JOIN unnest($1::bigint[], $2::int[]) AS x(id, n) ON w.job_id = x.id
    ORDER BY w.job_id FOR UPDATE OF w
)
UPDATE {s}.skiplock_waits w SET parents_left = w.parents_left - locked.n
FROM locked WHERE w.job_id = locked.job_id
RETURNING w.job_id, w.parents_left

-- name: CHILDREN_CANCEL
-- Waiting children of a failed parent are cancelled, the reason recorded as their error; what
-- their release would have given them is kept (skiplock_unreleased) for a retry.
WITH x AS (
    SELECT * FROM unnest($1::bigint[], $2::text[]) AS x(id, error)
), ended AS (
    UPDATE {s}.skiplock_jobs j
    SET state = 'cancelled', finished_at = coalesce($3::timestamptz, now()),
        errors = j.errors || jsonb_build_array(x.error::jsonb)
    FROM x WHERE j.id = x.id AND j.state = 'waiting'
    RETURNING j.id
), gone AS (
    DELETE FROM {s}.skiplock_waits WHERE job_id IN (SELECT id FROM x)
    RETURNING job_id, pass_results, batch_id, signal
), kept AS (
    INSERT INTO {s}.skiplock_unreleased (job_id, pass_results, batch_id, ended_at)
    SELECT g.job_id, g.pass_results, g.batch_id, coalesce($3::timestamptz, now()) FROM gone g
    WHERE g.signal IS NULL AND g.job_id IN (SELECT id FROM ended)
    ON CONFLICT (job_id) DO NOTHING
)
SELECT id FROM ended

-- name: RELEASE_SUCCEEDED
-- The release of parents $1 that succeeded (a completion's own statement releases what it
-- can; this one the rest, a chunk of at most $4 open edges a call): see release_tail. One row:
-- how many edges it resolved (a full chunk: call again), the children released, their
-- queues, and the children left at zero for CHILDREN_READY. $5: the parents' lane (a
-- workflow lives in one).
--
-- Its transaction commits without waiting for its WAL to reach the disk (synchronous_commit
-- off, for this transaction alone): a chain's link waited for three flushes in a row (the
-- outcome, this release, the next claim). What it writes is derived from outcomes already
-- durable: a crash that loses it leaves the parents finished with their edges open, which
-- the sweep releases again, and the claim of a child it released flushes it first (the WAL
-- is one sequence).
WITH p AS (
    SELECT j.id, j.result FROM {s}.skiplock_jobs j
    WHERE j.id = ANY($1::bigint[]) AND j.lane = $5 AND j.state = 'succeeded'
), lazy AS (
    SELECT set_config('synchronous_commit', 'off', true)
)
, todo AS (
    SELECT d.ctid AS at FROM {s}.skiplock_deps d JOIN p ON d.parent_id = p.id
    WHERE d.parent_state IS NULL
    ORDER BY d.child_id, d.parent_id LIMIT $4 FOR UPDATE OF d
), resolved AS (
    -- by ctid (stable while locked): a semi join with the locking CTE was planned as a
    -- nested loop over it, 4.5 million comparisons for a fan-out of 3,000
    UPDATE {s}.skiplock_deps d
    SET parent_state = 'succeeded', resolved_at = now()
    FROM todo WHERE d.ctid = todo.at
    RETURNING d.child_id, d.parent_id
), kept AS (
    -- each parent's result once, for all its edges (not a copy on each: a 253 kB result to
    -- 1,000 children was 271 MB of WAL), after its edges were locked and resolved
    INSERT INTO {s}.skiplock_parent_results AS k (parent_id, result)
    SELECT p.id, p.result FROM p WHERE p.id IN (SELECT rs.parent_id FROM resolved rs)
    ON CONFLICT (parent_id) DO UPDATE SET result = EXCLUDED.result
    WHERE k.result IS DISTINCT FROM EXCLUDED.result
), wlocked AS (
    -- the count as the lock found it: a release that committed while this one waited for
    -- the lock has counted its parents off already (this statement's snapshot is older, so
    -- the decisions below read these values, never the snapshot's); ``fresh``: the row the
    -- lock found is the one the snapshot holds (``s``, not locked, keeps the snapshot's),
    -- and the child takes no list of results (those CHILDREN_READY releases)
    SELECT w.job_id, w.parents_left AS left_, w.signal, c.n,
           w.xmin = s.xmin AND w.pass_results IS DISTINCT FROM 'all' AS fresh
    FROM {s}.skiplock_waits w
    JOIN (SELECT child_id, count(*)::int AS n FROM resolved GROUP BY child_id) c
      ON w.job_id = c.child_id
    JOIN {s}.skiplock_waits s ON s.job_id = w.job_id
    ORDER BY w.job_id FOR UPDATE OF w
), counted AS (
    -- three statements on disjoint rows (one statement may not change a row twice):
    -- counted down, gone at zero, or left at zero for a newer snapshot
    UPDATE {s}.skiplock_waits w SET parents_left = wlocked.left_ - wlocked.n
    FROM wlocked WHERE w.job_id = wlocked.job_id AND wlocked.left_ > wlocked.n
), z AS (
    DELETE FROM {s}.skiplock_waits w USING wlocked
    WHERE w.job_id = wlocked.job_id AND wlocked.left_ = wlocked.n AND wlocked.signal IS NULL
      AND wlocked.fresh
    RETURNING w.job_id, w.pass_results, w.batch_id
), stale AS (
    UPDATE {s}.skiplock_waits w SET parents_left = 0
    FROM wlocked WHERE w.job_id = wlocked.job_id AND wlocked.left_ = wlocked.n
      AND wlocked.signal IS NULL AND NOT wlocked.fresh
    RETURNING w.job_id
), pm AS (
    -- the results of this statement's parents that a child it releases takes (an edge it
    -- resolves holds its new result only after it ends), by id: only those, as every
    -- parent's would make one value of a batch's results, which jsonb bounds
    SELECT jsonb_object_agg(p.id::text, coalesce(p.result, 'null'::jsonb)) AS m FROM p
    WHERE p.id IN (SELECT rs.parent_id FROM resolved rs JOIN z ON z.job_id = rs.child_id
                   WHERE z.pass_results = 'previous')
), r AS (
    -- a released child's arguments, its first the parent's result as its wait row asks, by
    -- key lookups only: joined to the statement's own resolved edges, a fan-out's 9,999
    -- children each scanned all 9,999 of them (4.3 s)
    UPDATE {s}.skiplock_jobs j
    SET state = 'pending', run_at = greatest(j.run_at, coalesce($3::timestamptz, now())),
        args = CASE z.pass_results
            WHEN 'previous' THEN jsonb_build_array(
                (SELECT coalesce((SELECT pm.m FROM pm) -> d.parent_id::text,
                     coalesce(d.parent_result, CASE WHEN d.parent_state = 'succeeded' THEN (
    SELECT k.result FROM {s}.skiplock_parent_results k WHERE k.parent_id = d.parent_id) END), 'null'::jsonb) FROM {s}.skiplock_deps d
                 WHERE d.child_id = j.id ORDER BY d.position LIMIT 1)) || j.args
            WHEN 'batch' THEN jsonb_build_array(z.batch_id) || j.args
            ELSE j.args END
    FROM z WHERE j.id = z.job_id AND j.lane = $5 AND j.state = 'waiting'
    RETURNING j.id, j.queue
), woken AS (
    SELECT pg_notify($2, q.queue) FROM (SELECT DISTINCT queue FROM r) q
)
SELECT (SELECT count(*) FROM resolved) AS resolved_n,
       (SELECT array_agg(id) FROM r) AS released,
       (SELECT array_agg(DISTINCT queue) FROM r) AS woken,
       (SELECT array_agg(job_id) FROM stale) AS stale
WHERE (SELECT count(*) FROM woken) >= 0 AND (SELECT count(*) FROM lazy) >= 0

-- name: CHILDREN_READY
-- Children with no parent left become pending (a delayed one keeps its later run_at), their
-- first argument the parents' results when asked ('previous': the one parent's result; 'all':
-- the list of them in the order given; 'batch': the batch's id). A NOTIFY per queue wakes the
-- workers at commit. A child whose list of results would be over $4 bytes (GATHERED_SIZE,
-- summed: the list is never built) is buried instead: dead, never run, a PayloadTooLarge
-- error naming the sizes, its release kept for a retry (skiplock_unreleased); the caller lets
-- its own children follow their policies.
WITH c AS (
    SELECT w.job_id FROM {s}.skiplock_waits w
    WHERE w.job_id = ANY($1::bigint[]) AND w.parents_left = 0 AND w.signal IS NULL
    ORDER BY w.job_id FOR UPDATE
), sized AS (
    -- a body's size, read only for a body ('all'; CASE runs the reads only there)
    SELECT c.job_id,
           CASE WHEN w.pass_results = 'all' THEN (
               SELECT count(*) FROM {s}.skiplock_deps d WHERE d.child_id = c.job_id) END AS n,
           CASE WHEN w.pass_results = 'all' THEN (
               SELECT coalesce(sum(octet_length(coalesce(coalesce(d.parent_result, CASE WHEN d.parent_state = 'succeeded' THEN (
    SELECT k.result FROM {s}.skiplock_parent_results k WHERE k.parent_id = d.parent_id) END), 'null'::jsonb)::text) + 1), 1) + 1
               FROM {s}.skiplock_deps d WHERE d.child_id = c.job_id) END AS size
    FROM c JOIN {s}.skiplock_waits w ON w.job_id = c.job_id
), gone AS (
    DELETE FROM {s}.skiplock_waits w USING sized
    WHERE w.job_id = sized.job_id
    RETURNING w.job_id, w.pass_results, w.batch_id, w.signal, sized.n,
              coalesce(sized.size > $4::bigint, false) AS big, sized.size
), r AS (
    UPDATE {s}.skiplock_jobs j
    SET state = 'pending', run_at = greatest(j.run_at, coalesce($3::timestamptz, now())),
        args = CASE g.pass_results
            WHEN 'previous' THEN jsonb_build_array(
                (SELECT coalesce(coalesce(d.parent_result, CASE WHEN d.parent_state = 'succeeded' THEN (
    SELECT k.result FROM {s}.skiplock_parent_results k WHERE k.parent_id = d.parent_id) END), 'null'::jsonb)
                 FROM {s}.skiplock_deps d
                 WHERE d.child_id = j.id ORDER BY d.position LIMIT 1)) || j.args
            WHEN 'all' THEN jsonb_build_array(
                (SELECT coalesce(jsonb_agg(coalesce(coalesce(d.parent_result, CASE WHEN d.parent_state = 'succeeded' THEN (
    SELECT k.result FROM {s}.skiplock_parent_results k WHERE k.parent_id = d.parent_id) END), 'null'::jsonb)
                                           ORDER BY d.position), '[]'::jsonb)
                 FROM {s}.skiplock_deps d WHERE d.child_id = j.id)) || j.args
            WHEN 'batch' THEN jsonb_build_array(g.batch_id) || j.args
            ELSE j.args END
    FROM gone g WHERE j.id = g.job_id AND j.state = 'waiting' AND NOT g.big
    RETURNING j.id, j.queue
), ended AS (
    UPDATE {s}.skiplock_jobs j
    SET state = 'dead', finished_at = coalesce($3::timestamptz, now()),
        errors = j.errors || jsonb_build_array(jsonb_build_object(
            'attempt', 0, 'at', coalesce($3::timestamptz, now()),
            'message', format('the list of its %s parents'' results is %s bytes, over '
                              'max_payload_bytes (%s): it was not run', g.n, g.size, $4::bigint),
            'type', 'PayloadTooLarge', 'traceback', NULL, 'worker', NULL))
    FROM gone g WHERE j.id = g.job_id AND j.state = 'waiting' AND g.big
    RETURNING j.id
), kept AS (
    INSERT INTO {s}.skiplock_unreleased (job_id, pass_results, batch_id, ended_at)
    SELECT g.job_id, g.pass_results, g.batch_id, coalesce($3::timestamptz, now()) FROM gone g
    WHERE g.signal IS NULL AND g.job_id IN (SELECT id FROM ended)
    ON CONFLICT (job_id) DO NOTHING
), woken AS (
    SELECT pg_notify($2, q.queue) FROM (SELECT DISTINCT queue FROM r) q
)
SELECT id, queue, false AS buried FROM r WHERE (SELECT count(*) FROM woken) >= 0
UNION ALL SELECT id, NULL, true FROM ended

-- name: OPEN_PARENTS
-- The sweep's look: parents with an open edge that are finished or gone (a release a crash
-- or a commit race left undone); not live nor waiting, so the partitions probed are those
-- two, whatever history holds. An edge that waits for its failed parent's retry ('wait')
-- counts only once that parent succeeded, or is gone (pruned: no retry can come, its child
-- is cancelled): a thousand such could otherwise fill every look.
SELECT DISTINCT d.parent_id FROM {s}.skiplock_deps d
WHERE d.parent_state IS NULL
  AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j
                  WHERE j.id = d.parent_id AND j.state IN ('pending', 'running', 'waiting'))
  AND (d.on_failure <> 'wait'
       OR NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j
                      WHERE j.id = d.parent_id AND j.state IN ('dead', 'cancelled')))
LIMIT $1

-- name: STRANDED_WAITS
-- The sweep's second look: waiting children whose count reached zero and who were left so
-- (a release that met a newer wait row leaves its child to CHILDREN_READY, and its caller
-- may die before that runs).
SELECT w.job_id FROM {s}.skiplock_waits w
WHERE w.parents_left = 0 AND w.signal IS NULL
ORDER BY w.job_id LIMIT $1

-- name: WAITS_EXPIRED
-- Parked jobs whose wait timed out: the timeout takes the mailbox entry the wait waits for
-- (the entry's primary key decides between a timeout and a racing signal: a signal that
-- comes after it is the next entry, kept for the next wait), and they run again.
WITH due AS (
    SELECT j.id, w.signal, coalesce(w.signal_seq, 1) AS seq
    FROM {s}.skiplock_jobs j JOIN {s}.skiplock_waits w ON w.job_id = j.id
    WHERE j.state = 'waiting' AND w.signal IS NOT NULL
      AND j.run_at <= coalesce($3::timestamptz, now())
    ORDER BY j.run_at LIMIT $1
    FOR UPDATE OF j SKIP LOCKED
), marked AS (
    INSERT INTO {s}.skiplock_signals (job_id, name, seq, kind)
    SELECT id, signal, seq, 'timeout' FROM due ON CONFLICT DO NOTHING
), gone AS (
    DELETE FROM {s}.skiplock_waits WHERE job_id IN (SELECT id FROM due)
), r AS (
    UPDATE {s}.skiplock_jobs j SET state = 'pending', run_at = coalesce($3::timestamptz, now())
    FROM due WHERE j.id = due.id AND j.state = 'waiting'
    RETURNING j.id, j.queue
), woken AS (
    SELECT pg_notify($2, q.queue) FROM (SELECT DISTINCT queue FROM r) q
)
SELECT id, queue FROM r WHERE (SELECT count(*) FROM woken) >= 0

-- name: WAIT_PREPARE
-- A running job about to park: record the signal it waits for (its name, and the entry of
-- that name's mailbox: its n-th wait for the name takes the n-th), under its lease.
INSERT INTO {s}.skiplock_waits (job_id, signal, signal_seq)
SELECT id, $3, $4 FROM {s}.skiplock_jobs
WHERE id = $1 AND lease_token = $2 AND state = 'running'
ON CONFLICT (job_id) DO UPDATE SET signal = EXCLUDED.signal, signal_seq = EXCLUDED.signal_seq
RETURNING job_id

-- name: PARKED_RESUME
-- Parked jobs whose signal came before they parked run again at once (the signal's sender
-- locked the row, so it either saw the job waiting or left its signal for this look).
WITH due AS (
    SELECT w.job_id AS id FROM {s}.skiplock_waits w
    WHERE w.job_id = ANY($1::bigint[]) AND w.signal IS NOT NULL
      AND EXISTS (SELECT 1 FROM {s}.skiplock_signals s
                  WHERE s.job_id = w.job_id AND s.name = w.signal
                    AND s.seq >= coalesce(w.signal_seq, 1))
), gone AS (
    DELETE FROM {s}.skiplock_waits WHERE job_id IN (SELECT id FROM due)
), r AS (
    UPDATE {s}.skiplock_jobs j SET state = 'pending', run_at = coalesce($3::timestamptz, now())
    FROM due WHERE j.id = due.id AND j.state = 'waiting'
    RETURNING j.id, j.queue
), woken AS (
    SELECT pg_notify($2, q.queue) FROM (SELECT DISTINCT queue FROM r) q
)
SELECT id, queue FROM r WHERE (SELECT count(*) FROM woken) >= 0

-- name: PARKED_SIGNALLED
-- The sweep's look for parked jobs whose signal is stored all the same (it came while the
-- job ran towards its park, and the look after that completion failed, or its process
-- died): they run again, rather than at their timeout.
WITH due AS (
    SELECT j.id FROM {s}.skiplock_waits w JOIN {s}.skiplock_jobs j ON j.id = w.job_id
    WHERE w.signal IS NOT NULL AND j.state = 'waiting'
      AND EXISTS (SELECT 1 FROM {s}.skiplock_signals s
                  WHERE s.job_id = w.job_id AND s.name = w.signal
                    AND s.seq >= coalesce(w.signal_seq, 1))
    ORDER BY j.id LIMIT $1
    FOR UPDATE OF j SKIP LOCKED
), gone AS (
    DELETE FROM {s}.skiplock_waits WHERE job_id IN (SELECT id FROM due)
), r AS (
    UPDATE {s}.skiplock_jobs j SET state = 'pending', run_at = coalesce($3::timestamptz, now())
    FROM due WHERE j.id = due.id AND j.state = 'waiting'
    RETURNING j.id, j.queue
), woken AS (
    SELECT pg_notify($2, q.queue) FROM (SELECT DISTINCT queue FROM r) q
)
SELECT id, queue FROM r WHERE (SELECT count(*) FROM woken) >= 0

-- name: JOB_LOCK_STATE
-- A signal's first step: the job's row locked (whatever its state), so a park and a signal
-- happen one after the other.
SELECT state FROM {s}.skiplock_jobs WHERE id = $1 FOR UPDATE

-- name: SIGNAL_APPEND
-- A signal (from $4) joins the end of its name's mailbox (the job's row is locked: one
-- signal or timeout at a time), unless the job keeps $5 signals no wait took yet (of any
-- name; the partial index counts them): then nothing is written, and no row comes back.
-- Returns its place.
INSERT INTO {s}.skiplock_signals (job_id, name, seq, kind, payload, sender, taken)
SELECT $1, $2, coalesce(max(seq), 0) + 1, 'signal', $3::jsonb, $4, false
FROM {s}.skiplock_signals WHERE job_id = $1 AND name = $2
HAVING (SELECT count(*) FROM {s}.skiplock_signals u
        WHERE u.job_id = $1 AND u.kind = 'signal' AND NOT u.taken) < $5
RETURNING seq

-- name: WAIT_OF
-- What the job waits for now: the signal's name and the entry of it (a wait on parents: no
-- signal).
SELECT signal, coalesce(signal_seq, 1) FROM {s}.skiplock_waits WHERE job_id = $1

-- name: SIGNAL_WAKE
-- The signalled job, parked on this name, runs again now (one still running towards its
-- park keeps its wait row: the park's own look finds the signal).
WITH r AS (
    UPDATE {s}.skiplock_jobs j SET state = 'pending', run_at = coalesce($4::timestamptz, now())
    WHERE j.id = $1 AND j.state = 'waiting'
      AND EXISTS (SELECT 1 FROM {s}.skiplock_waits w WHERE w.job_id = $1 AND w.signal = $2)
    RETURNING j.queue
), gone AS (
    DELETE FROM {s}.skiplock_waits WHERE job_id = $1 AND EXISTS (SELECT 1 FROM r)
)
SELECT queue, pg_notify($3, queue) FROM r

-- name: SIGNAL_TAKE
-- A wait takes its mailbox entry: (kind, payload, sender, at), the entry marked taken the
-- first time (it no longer counts towards the job's bound; a re-run reads it again).
WITH took AS (
    UPDATE {s}.skiplock_signals SET taken = true
    WHERE job_id = $1 AND name = $2 AND seq = $3 AND NOT taken
    RETURNING kind, payload, sender, at
)
SELECT kind, payload::text, sender, at FROM took
UNION ALL
SELECT kind, payload::text, sender, at FROM {s}.skiplock_signals
WHERE job_id = $1 AND name = $2 AND seq = $3 AND NOT EXISTS (SELECT 1 FROM took)

-- name: JOB_AUDIT_ADD
-- A person's action on the job, in its own trail (as retry and cancel record theirs).
UPDATE {s}.skiplock_jobs
SET audit = CASE WHEN jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) < 20
        THEN audit || jsonb_build_array(jsonb_build_object('at', coalesce($4::timestamptz, now()), 'who', $2::text, 'what', $3::text))
        ELSE jsonb_build_array(jsonb_build_object(
                'at', audit -> (jsonb_array_length(audit) - 20) -> 'at',
                'who', 'skiplock',
                'what', format('%s earlier actions left out', coalesce((audit -> 0 ->> 'omitted')::bigint, 0) + (jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)),
                'omitted', coalesce((audit -> 0 ->> 'omitted')::bigint, 0) + (jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)))
            || jsonb_path_query_array(audit, '$[$from to last]',
                                      jsonb_build_object('from', jsonb_array_length(audit) - 20 + 1))
            || jsonb_build_array(jsonb_build_object('at', coalesce($4::timestamptz, now()), 'who', $2::text, 'what', $3::text)) END
WHERE id = $1

-- name: STEP_GET
SELECT result::text FROM {s}.skiplock_steps WHERE job_id = $1 AND name = $2 AND seq = $3

-- name: STEP_PUT
-- A step's result (its name's $3-th occurrence in the run), stored only while the job runs
-- under this lease (a worker that lost it stores nothing: the one that holds it now runs the
-- step, or finds it stored).
INSERT INTO {s}.skiplock_steps (job_id, name, seq, result)
SELECT id, $3, $5, $4::jsonb FROM {s}.skiplock_jobs
WHERE id = $1 AND lease_token = $2 AND state = 'running'
ON CONFLICT DO NOTHING
RETURNING job_id

-- name: PARENT_RESULTS
SELECT d.parent_id, d.parent_state, (coalesce(d.parent_result, CASE WHEN d.parent_state = 'succeeded' THEN (
    SELECT k.result FROM {s}.skiplock_parent_results k WHERE k.parent_id = d.parent_id) END))::text
FROM {s}.skiplock_deps d WHERE d.child_id = $1 ORDER BY d.position

-- name: JOB_PARENTS
-- A job's first $2 parents, in order (a chord's body has up to 10,000: a page shows a few).
SELECT d.parent_id, coalesce(j.state, d.parent_state, 'gone'), d.on_failure
FROM {s}.skiplock_deps d LEFT JOIN {s}.skiplock_jobs j ON j.id = d.parent_id
WHERE d.child_id = $1 ORDER BY d.position, d.parent_id LIMIT $2

-- name: JOB_CHILDREN
-- A job's children by id, after id $3 (0: from the first), $2 at most.
SELECT d.child_id, coalesce(j.state, 'gone'), d.on_failure
FROM {s}.skiplock_deps d LEFT JOIN {s}.skiplock_jobs j ON j.id = d.child_id
WHERE d.parent_id = $1 AND d.child_id > $3 ORDER BY d.child_id LIMIT $2

-- name: JOB_PARENT_COUNTS
-- Every parent of a job counted by its state.
SELECT coalesce(j.state, d.parent_state, 'gone') AS state, count(*)
FROM {s}.skiplock_deps d LEFT JOIN {s}.skiplock_jobs j ON j.id = d.parent_id
WHERE d.child_id = $1 GROUP BY 1 ORDER BY 1

-- name: JOB_PARENTS_AFTER
-- A page of a job's parents by id, after id $2.
SELECT d.parent_id, coalesce(j.state, d.parent_state, 'gone'), d.on_failure
FROM {s}.skiplock_deps d LEFT JOIN {s}.skiplock_jobs j ON j.id = d.parent_id
WHERE d.child_id = $1 AND d.parent_id > $2 ORDER BY d.parent_id LIMIT $3

-- name: JOB_WAIT
SELECT parents_left, signal, pass_results FROM {s}.skiplock_waits WHERE job_id = $1

-- name: JOB_BATCH
SELECT batch_id FROM {s}.skiplock_batch_jobs WHERE job_id = $1
UNION SELECT id FROM {s}.skiplock_batches WHERE on_success = $1 OR on_complete = $1
LIMIT 1

-- name: BATCH_INSERT
INSERT INTO {s}.skiplock_batches DEFAULT VALUES RETURNING id

-- name: BATCH_SET_CALLBACKS
UPDATE {s}.skiplock_batches SET on_success = $2, on_complete = $3 WHERE id = $1

-- name: BATCH_GET_LOCKED
SELECT closed_at IS NOT NULL, on_success, on_complete FROM {s}.skiplock_batches
WHERE id = $1 FOR UPDATE

-- name: BATCH_CLOSE
UPDATE {s}.skiplock_batches SET closed_at = now() WHERE id = $1 AND closed_at IS NULL
RETURNING on_success, on_complete

-- name: BATCH_ABORT
-- A batch whose block raised is closed as aborted (an open one only: a closed batch's
-- callbacks may be running already).
UPDATE {s}.skiplock_batches
SET closed_at = coalesce($2::timestamptz, now()), aborted_at = coalesce($2::timestamptz, now())
WHERE id = $1 AND closed_at IS NULL
RETURNING on_success, on_complete

-- name: MEMBERS_CANCEL
-- An aborted batch's members that never started (pending or waiting, never attempted) are
-- cancelled, the reason recorded as their error; one that started (running, parked, waiting
-- for a retry) runs to its end.
UPDATE {s}.skiplock_jobs j
SET state = 'cancelled', finished_at = coalesce($3::timestamptz, now()),
    errors = j.errors || jsonb_build_array($2::jsonb)
FROM {s}.skiplock_batch_jobs m
WHERE m.batch_id = $1 AND j.id = m.job_id
  AND j.state IN ('pending', 'waiting') AND j.attempted_at IS NULL
RETURNING j.id

-- name: WAITS_DROP
DELETE FROM {s}.skiplock_waits WHERE job_id = ANY($1::bigint[])

-- name: BATCH_MEMBERS_INSERT
INSERT INTO {s}.skiplock_batch_jobs (batch_id, job_id)
SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING

-- name: BATCH_INFO
SELECT b.id, extract(epoch FROM b.created_at), extract(epoch FROM b.closed_at),
       b.on_success, b.on_complete,
       (SELECT coalesce(jsonb_object_agg(s.state, s.n), '{}'::jsonb)::text FROM (
            SELECT coalesce(j.state, 'gone') AS state, count(*) AS n
            FROM {s}.skiplock_batch_jobs m LEFT JOIN {s}.skiplock_jobs j ON j.id = m.job_id
            WHERE m.batch_id = b.id GROUP BY 1) s),
       extract(epoch FROM b.aborted_at), b.pruned_members
FROM {s}.skiplock_batches b WHERE b.id = $1

-- name: WAIT_NEXT_TIMEOUT
-- Seconds from now ($1, NULL: the database's) until the first parked wait times out (<= 0:
-- one is due), NULL if no job is parked: a worker's wait timer sleeps until then. Parked
-- jobs only (the wait rows with a signal, a partial index), not every waiting child.
SELECT extract(epoch FROM min(j.run_at) - coalesce($1::timestamptz, now()))::float8
FROM {s}.skiplock_waits w JOIN {s}.skiplock_jobs j ON j.id = w.job_id
WHERE w.signal IS NOT NULL AND j.state = 'waiting'

-- name: WAITING_LIST
-- Waiting jobs for a person: what each waits for (parents left, or a signal and until when).
SELECT j.id, j.task, j.queue, w.parents_left, w.signal, extract(epoch FROM j.run_at),
       extract(epoch FROM j.created_at)
FROM {s}.skiplock_jobs j LEFT JOIN {s}.skiplock_waits w ON w.job_id = j.id
WHERE j.state = 'waiting' ORDER BY j.id LIMIT $1

-- name: GRAPH_EDGES
-- The edges that touch the jobs $1 (a step of the graph's walk outward from one job).
SELECT parent_id, child_id FROM {s}.skiplock_deps
WHERE parent_id = ANY($1::bigint[]) OR child_id = ANY($1::bigint[])

-- name: GRAPH_NODES
SELECT id, task, state FROM {s}.skiplock_jobs WHERE id = ANY($1::bigint[])

-- name: WORKFLOW_PRUNE
-- What a workflow leaves once its jobs are gone (pruned, discarded), at most $1 rows a table:
-- steps and signals of jobs no longer kept, edges of children no longer kept, wait rows of
-- jobs that no longer wait (or prepare to park), batch members gone (each batch adds how many
-- of its own went to its pruned_members: they count as 'gone' while it lasts), closed
-- batches left with no member and no callback, the kept releases of jobs gone or retried,
-- and the kept results of parents no edge leads from any more (edges go with their children
-- first: a result goes at the prune after its last child's).
WITH steps AS (
    DELETE FROM {s}.skiplock_steps WHERE ctid IN (
        SELECT x.ctid FROM {s}.skiplock_steps x
        WHERE NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j WHERE j.id = x.job_id) LIMIT $1)
    RETURNING 1
), signals AS (
    DELETE FROM {s}.skiplock_signals WHERE ctid IN (
        SELECT x.ctid FROM {s}.skiplock_signals x
        WHERE NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j WHERE j.id = x.job_id) LIMIT $1)
    RETURNING 1
), edges AS (
    DELETE FROM {s}.skiplock_deps WHERE ctid IN (
        SELECT x.ctid FROM {s}.skiplock_deps x
        WHERE NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j WHERE j.id = x.child_id) LIMIT $1)
    RETURNING 1
), waits AS (
    DELETE FROM {s}.skiplock_waits WHERE job_id IN (
        SELECT x.job_id FROM {s}.skiplock_waits x
        WHERE NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j
                          WHERE j.id = x.job_id AND j.state IN ('waiting', 'running'))
        LIMIT $1)
    RETURNING 1
), members AS (
    DELETE FROM {s}.skiplock_batch_jobs WHERE ctid IN (
        SELECT x.ctid FROM {s}.skiplock_batch_jobs x
        WHERE NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j WHERE j.id = x.job_id) LIMIT $1)
    RETURNING batch_id
), pruned_members AS (
    -- only the rows this statement deleted (a concurrent prune's are skipped, not counted);
    -- never a batch the next CTE deletes (that one had no member row to delete)
    UPDATE {s}.skiplock_batches b SET pruned_members = b.pruned_members + g.n
    FROM (SELECT batch_id, count(*) AS n FROM members GROUP BY batch_id) g
    WHERE b.id = g.batch_id
    RETURNING 1
), batches AS (
    DELETE FROM {s}.skiplock_batches b WHERE b.id IN (
        SELECT x.id FROM {s}.skiplock_batches x
        WHERE x.closed_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_batch_jobs m WHERE m.batch_id = x.id)
          AND NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j
                          WHERE j.id IN (x.on_success, x.on_complete))
        LIMIT $1)
    RETURNING 1
), results AS (
    DELETE FROM {s}.skiplock_parent_results WHERE parent_id IN (
        SELECT x.parent_id FROM {s}.skiplock_parent_results x
        WHERE NOT EXISTS (SELECT 1 FROM {s}.skiplock_deps d WHERE d.parent_id = x.parent_id)
        LIMIT $1)
    RETURNING 1
), unreleased AS (
    DELETE FROM {s}.skiplock_unreleased WHERE job_id IN (
        SELECT x.job_id FROM {s}.skiplock_unreleased x
        WHERE NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j
                          WHERE j.id = x.job_id AND j.state IN ('cancelled', 'dead'))
        LIMIT $1)
    RETURNING 1
)
SELECT (SELECT count(*) FROM steps) + (SELECT count(*) FROM signals)
     + (SELECT count(*) FROM edges) + (SELECT count(*) FROM waits)
     + (SELECT count(*) FROM members) + (SELECT count(*) FROM batches)
     + (SELECT count(*) FROM unreleased) + (SELECT count(*) FROM results)

-- name: UNRELEASED_TAKE
-- A retry's first look: what a job that ended waiting for its parents kept (its row locked
-- while finished, the kept row taken: the retry writes its wait row anew).
WITH j AS (
    SELECT id FROM {s}.skiplock_jobs WHERE id = $1 AND state IN ('cancelled', 'dead')
    FOR UPDATE
)
DELETE FROM {s}.skiplock_unreleased u USING j WHERE u.job_id = j.id
RETURNING u.pass_results, u.batch_id

-- name: CHILD_EDGES
-- Every edge into a job a retry sends back to waiting, locked (in a release's order: by
-- parent), with its parent's state now ('gone': pruned).
SELECT d.parent_id, d.parent_state, d.on_failure, coalesce(j.state, 'gone')
FROM {s}.skiplock_deps d LEFT JOIN {s}.skiplock_jobs j ON j.id = d.parent_id
WHERE d.child_id = $1 ORDER BY d.parent_id
FOR UPDATE OF d

-- name: EDGES_REOPEN
-- Edges resolved for a parent that failed, and that a person retried since: open again, so
-- the retried child waits for the parent's new outcome.
UPDATE {s}.skiplock_deps SET parent_state = NULL, parent_result = NULL, resolved_at = NULL
WHERE child_id = $1 AND parent_id = ANY($2::bigint[])

-- name: JOB_REWAIT
-- A retried job that never got its parents' results waits for them again: attempts reset,
-- the retry in its audit, its wait row written anew ($2 parents left).
WITH w AS (
    INSERT INTO {s}.skiplock_waits (job_id, parents_left, pass_results, batch_id)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (job_id) DO UPDATE
    SET parents_left = EXCLUDED.parents_left, pass_results = EXCLUDED.pass_results,
        batch_id = EXCLUDED.batch_id, signal = NULL
)
UPDATE {s}.skiplock_jobs
SET state = 'waiting', attempt = 0, run_at = coalesce($6::timestamptz, now()),
    finished_at = NULL, result = NULL, progress = NULL, lease_token = NULL,
    lease_expires_at = NULL, cancel_requested = false,
    audit = CASE WHEN jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) < 20
        THEN audit || jsonb_build_array(jsonb_build_object('at', coalesce($6::timestamptz, now()), 'who', $5::text, 'what', 'retry'))
        ELSE jsonb_build_array(jsonb_build_object(
                'at', audit -> (jsonb_array_length(audit) - 20) -> 'at',
                'who', 'skiplock',
                'what', format('%s earlier actions left out', coalesce((audit -> 0 ->> 'omitted')::bigint, 0) + (jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)),
                'omitted', coalesce((audit -> 0 ->> 'omitted')::bigint, 0) + (jsonb_array_length(audit) - (CASE WHEN audit -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)))
            || jsonb_path_query_array(audit, '$[$from to last]',
                                      jsonb_build_object('from', jsonb_array_length(audit) - 20 + 1))
            || jsonb_build_array(jsonb_build_object('at', coalesce($6::timestamptz, now()), 'who', $5::text, 'what', 'retry')) END
WHERE id = $1

-- name: JOB_STATE_ERROR
SELECT state, errors -> -1 ->> 'message' FROM {s}.skiplock_jobs WHERE id = $1
