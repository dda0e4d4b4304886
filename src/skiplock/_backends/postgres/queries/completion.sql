-- name: JOB_SET_STATE_IF_RUNNING_MANY
-- Write a batch of outcomes (decided in Python: _transitions.py), each only where the row is
-- still running under its lease token: a worker whose lease was lost changes nothing. Errors
-- are appended, keeping the last $9; $10 holds the results (NULL: none kept), $12 progress
-- reported since the last heartbeat (NULL: none), $13 how long each attempt ran. The finished
-- ids are announced on the completion channel $11, one NOTIFY per 300 ids (a payload stays
-- under PostgreSQL's 8,000 bytes), so a batch of outcomes costs one notification, not one each.
-- $14: the live segments to look for the rows in (those they were claimed from, or the long
-- one, where a rotation moves a job; NULL: any), so only those are read. $15: the lane the
-- rows are in (a batch of several lanes is one statement a lane).
WITH now_ AS (SELECT coalesce($8::timestamptz, now()) AS t),
c AS (
    -- A column every row of the batch leaves at its default comes as one NULL (unnest pads
    -- it out): postgres/rows.py, completion_params.
    SELECT id, token, state, coalesce(attempt_delta, 0) AS attempt_delta, run_after,
           coalesce(finished, true) AS finished, error, result, progress, run_s
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::float8[],
                $6::bool[], $7::text[], $10::text[], $12::text[], $13::float8[])
        AS c(id, token, state, attempt_delta, run_after, finished, error, result, progress,
             run_s)
), locked AS MATERIALIZED (
    -- Lock order: every statement that may wait on several job rows takes them in ascending
    -- id, here, before it writes any. An UPDATE ... FROM locks rows in its plan's order (the
    -- input array's, the heap's or the index's, as the statistics of the moment decide), so
    -- the completion batch and the heartbeat of one worker, holding the same rows in
    -- opposite orders, deadlocked (a second's stall, an outage logged; the heartbeat now
    -- skips rows held instead, JOB_HEARTBEAT_MANY). FOR NO KEY UPDATE is
    -- what the UPDATE takes anyway. A row that left running meanwhile (its token cleared) is not
    -- locked; the token test, not state = 'running', keeps this off the lease index (a scan
    -- of every running row) and on the primary key.
    -- state IN (...) names the live partition alone (a planner's pruning), which no partial
    -- index matches.
    SELECT id FROM {s}.skiplock_jobs
    WHERE id = ANY($1::bigint[]) AND lane = $15 AND lease_token IS NOT NULL AND state IN ('pending', 'running')
      AND ($14::smallint[] IS NULL OR segment = ANY($14::smallint[]))
    ORDER BY id
    FOR NO KEY UPDATE
), done AS (
    UPDATE {s}.skiplock_jobs j
    SET state = c.state,
        attempt = j.attempt + c.attempt_delta,
        run_at = coalesce((SELECT t FROM now_) + make_interval(secs => c.run_after), j.run_at),
        finished_at = CASE WHEN c.finished THEN (SELECT t FROM now_) END,
        lease_token = NULL,
        lease_expires_at = NULL,
        result = c.result::jsonb,
        progress = coalesce(c.progress::jsonb, j.progress),
        run_s = c.run_s,
        errors = CASE WHEN c.error IS NULL THEN j.errors
                      WHEN jsonb_array_length(j.errors) >= $9
                      THEN (j.errors - 0) || jsonb_build_array(c.error::jsonb)
                      ELSE j.errors || jsonb_build_array(c.error::jsonb) END
    FROM c
    -- A token is set only by a claim and cleared by every way out of running, so matching it
    -- is the fence; id = ANY keeps the plan on the primary key however big the batch, and
    -- the rows it updates are already locked (in id order) by ``locked``.
    -- (state IN: the live partition only; a finished row moves to its history partition)
    WHERE j.id = ANY(ARRAY(SELECT id FROM locked)) AND j.id = c.id AND j.lane = $15 AND j.lease_token = c.token
      AND j.state IN ('pending', 'running')
      AND ($14::smallint[] IS NULL OR j.segment = ANY($14::smallint[]))
    -- a finished job with open edges (its children wait for it) and a parked one (it may
    -- have been signalled meanwhile) are followed up by workflow_flows.after_completion
    RETURNING j.id, c.finished,
              c.finished AND EXISTS (SELECT 1 FROM {s}.skiplock_deps d
                             WHERE d.parent_id = j.id AND d.parent_state IS NULL) AS parented,
              c.state = 'waiting' AS parked, c.state = 'succeeded' AS succeeded
), told AS (
    SELECT pg_notify($11, string_agg(id::text, ',')) FROM (
        SELECT id, (row_number() OVER ()) / 300 AS chunk FROM done WHERE finished
    ) f GROUP BY chunk
)
SELECT id, parented, parked, succeeded FROM done WHERE (SELECT count(*) FROM told) >= 0

-- name: JOB_SET_STATE_AND_RELEASE
-- Write a batch of outcomes (decided in Python: _transitions.py), each only where the row is
-- still running under its lease token: a worker whose lease was lost changes nothing. Errors
-- are appended, keeping the last $9; $10 holds the results (NULL: none kept), $12 progress
-- reported since the last heartbeat (NULL: none), $13 how long each attempt ran. The finished
-- ids are announced on the completion channel $11, one NOTIFY per 300 ids (a payload stays
-- under PostgreSQL's 8,000 bytes), so a batch of outcomes costs one notification, not one each.
-- $14: the live segments to look for the rows in (those they were claimed from, or the long
-- one, where a rotation moves a job; NULL: any), so only those are read. $17: the lane the
-- rows are in (a batch of several lanes is one statement a lane).
WITH now_ AS (SELECT coalesce($8::timestamptz, now()) AS t),
c AS (
    -- A column every row of the batch leaves at its default comes as one NULL (unnest pads
    -- it out): postgres/rows.py, completion_params.
    SELECT id, token, state, coalesce(attempt_delta, 0) AS attempt_delta, run_after,
           coalesce(finished, true) AS finished, error, result, progress, run_s
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::float8[],
                $6::bool[], $7::text[], $10::text[], $12::text[], $13::float8[])
        AS c(id, token, state, attempt_delta, run_after, finished, error, result, progress,
             run_s)
), locked AS MATERIALIZED (
    -- Lock order: every statement that may wait on several job rows takes them in ascending
    -- id, here, before it writes any. An UPDATE ... FROM locks rows in its plan's order (the
    -- input array's, the heap's or the index's, as the statistics of the moment decide), so
    -- the completion batch and the heartbeat of one worker, holding the same rows in
    -- opposite orders, deadlocked (a second's stall, an outage logged; the heartbeat now
    -- skips rows held instead, JOB_HEARTBEAT_MANY). FOR NO KEY UPDATE is
    -- what the UPDATE takes anyway. A row that left running meanwhile (its token cleared) is not
    -- locked; the token test, not state = 'running', keeps this off the lease index (a scan
    -- of every running row) and on the primary key.
    -- state IN (...) names the live partition alone (a planner's pruning), which no partial
    -- index matches.
    SELECT id FROM {s}.skiplock_jobs
    WHERE id = ANY($1::bigint[]) AND lane = $17 AND lease_token IS NOT NULL AND state IN ('pending', 'running')
      AND ($14::smallint[] IS NULL OR segment = ANY($14::smallint[]))
    ORDER BY id
    FOR NO KEY UPDATE
), done AS (
    UPDATE {s}.skiplock_jobs j
    SET state = c.state,
        attempt = j.attempt + c.attempt_delta,
        run_at = coalesce((SELECT t FROM now_) + make_interval(secs => c.run_after), j.run_at),
        finished_at = CASE WHEN c.finished THEN (SELECT t FROM now_) END,
        lease_token = NULL,
        lease_expires_at = NULL,
        result = c.result::jsonb,
        progress = coalesce(c.progress::jsonb, j.progress),
        run_s = c.run_s,
        errors = CASE WHEN c.error IS NULL THEN j.errors
                      WHEN jsonb_array_length(j.errors) >= $9
                      THEN (j.errors - 0) || jsonb_build_array(c.error::jsonb)
                      ELSE j.errors || jsonb_build_array(c.error::jsonb) END
    FROM c
    -- A token is set only by a claim and cleared by every way out of running, so matching it
    -- is the fence; id = ANY keeps the plan on the primary key however big the batch, and
    -- the rows it updates are already locked (in id order) by ``locked``.
    -- (state IN: the live partition only; a finished row moves to its history partition)
    WHERE j.id = ANY(ARRAY(SELECT id FROM locked)) AND j.id = c.id AND j.lane = $17 AND j.lease_token = c.token
      AND j.state IN ('pending', 'running')
      AND ($14::smallint[] IS NULL OR j.segment = ANY($14::smallint[]))
    -- a finished job with open edges (its children wait for it) and a parked one (it may
    -- have been signalled meanwhile) are followed up by workflow_flows.after_completion
    RETURNING j.id, c.finished, c.result,
              c.finished AND c.state <> 'succeeded' AND EXISTS (SELECT 1 FROM {s}.skiplock_deps d
                             WHERE d.parent_id = j.id AND d.parent_state IS NULL) AS parented,
              c.state = 'waiting' AS parked, c.state = 'succeeded' AS succeeded
), told AS (
    SELECT pg_notify($11, string_agg(id::text, ',')) FROM (
        SELECT id, (row_number() OVER ()) / 300 AS chunk FROM done WHERE finished
    ) f GROUP BY chunk
), p AS (
    SELECT id, result::jsonb AS result FROM done WHERE succeeded
)
, todo AS (
    SELECT d.ctid AS at FROM {s}.skiplock_deps d JOIN p ON d.parent_id = p.id
    WHERE d.parent_state IS NULL
    ORDER BY d.child_id, d.parent_id LIMIT $16 FOR UPDATE OF d
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
    SET state = 'pending', run_at = greatest(j.run_at, coalesce($8::timestamptz, now())),
        args = CASE z.pass_results
            WHEN 'previous' THEN jsonb_build_array(
                (SELECT coalesce((SELECT pm.m FROM pm) -> d.parent_id::text,
                     coalesce(d.parent_result, CASE WHEN d.parent_state = 'succeeded' THEN (
    SELECT k.result FROM {s}.skiplock_parent_results k WHERE k.parent_id = d.parent_id) END), 'null'::jsonb) FROM {s}.skiplock_deps d
                 WHERE d.child_id = j.id ORDER BY d.position LIMIT 1)) || j.args
            WHEN 'batch' THEN jsonb_build_array(z.batch_id) || j.args
            ELSE j.args END
    FROM z WHERE j.id = z.job_id AND j.lane = $17 AND j.state = 'waiting'
    RETURNING j.id, j.queue
), woken AS (
    SELECT pg_notify($15, q.queue) FROM (SELECT DISTINCT queue FROM r) q
)
SELECT id, parented, parked, succeeded,
       (SELECT count(*) FROM resolved) AS resolved_n,
       (SELECT array_agg(DISTINCT queue) FROM r) AS woken,
       (SELECT array_agg(job_id) FROM stale) AS stale
FROM done WHERE (SELECT count(*) FROM told) >= 0 AND (SELECT count(*) FROM woken) >= 0

-- name: JOB_RECLAIM_EXPIRED
-- Return rows whose lease expired to pending (or dead when attempts are spent; cancelled when a
-- person asked to cancel them, whose worker is gone), noting why; each row as it now stands,
-- locked_by still the worker that lost it (for the reclaim's log event).
-- SKIP LOCKED: concurrent reclaimers split the rows instead of acting on one twice, and it
-- never waits on a row, so lease order is safe here (no deadlock with an id-ordered lock).
-- Of lane $3 alone.
WITH now_ AS (SELECT coalesce($1::timestamptz, now()) AS t),
x AS MATERIALIZED (
    SELECT id FROM {s}.skiplock_jobs
    WHERE lane = $3 AND state = 'running' AND lease_expires_at < (SELECT t FROM now_)
    ORDER BY lease_expires_at LIMIT 1000
    FOR UPDATE SKIP LOCKED
)
UPDATE {s}.skiplock_jobs j
SET state = CASE WHEN j.cancel_requested THEN 'cancelled'
                 WHEN j.attempt >= j.max_attempts THEN 'dead' ELSE 'pending' END,
    finished_at = CASE WHEN j.cancel_requested OR j.attempt >= j.max_attempts
                       THEN (SELECT t FROM now_) END,
    -- run_at kept: a reclaimed job keeps its place among the ready (its priority, its age)
    lease_token = NULL, lease_expires_at = NULL,
    reclaims = j.reclaims + 1, reclaimed_at = (SELECT t FROM now_), run_s = NULL,
    errors = CASE WHEN jsonb_array_length(j.errors) >= $2 THEN j.errors - 0 ELSE j.errors END
             || jsonb_build_array(jsonb_build_object(
                    'attempt', j.attempt, 'at', (SELECT t FROM now_),
                    'message', 'lease expired (worker ' || coalesce(j.locked_by, '?') || ' stopped heartbeating)',
                    'traceback', NULL))
FROM x WHERE j.id = x.id AND j.lane = $3 AND j.state IN ('pending', 'running')
RETURNING j.id, j.task, j.queue, j.state, j.attempt, j.max_attempts, j.correlation_id,
          j.locked_by

-- name: JOB_RECLAIM_WORKER
-- JOB_RECLAIM_EXPIRED for every lease of worker $3 (its token prefix: tokens are
-- '<worker id>:<claim>'), expired or not: its supervisor saw it exit, or another worker saw
-- it is gone, so nothing renews them; the error reads 'worker <locked_by> ' || $4.
-- A row a live worker holds has another token and is never touched (fencing unchanged).
-- Of lane $5 alone.
WITH now_ AS (SELECT coalesce($1::timestamptz, now()) AS t),
x AS MATERIALIZED (
    SELECT id FROM {s}.skiplock_jobs
    WHERE lane = $5 AND state = 'running' AND lease_expires_at IS NOT NULL
      AND left(lease_token, length($3) + 1) = $3 || ':'
    -- it waits for rows a heartbeat or a person holds, so it locks in their order (id)
    ORDER BY id
    FOR NO KEY UPDATE
)
UPDATE {s}.skiplock_jobs j
SET state = CASE WHEN j.cancel_requested THEN 'cancelled'
                 WHEN j.attempt >= j.max_attempts THEN 'dead' ELSE 'pending' END,
    finished_at = CASE WHEN j.cancel_requested OR j.attempt >= j.max_attempts
                       THEN (SELECT t FROM now_) END,
    -- run_at kept: a reclaimed job keeps its place among the ready (its priority, its age)
    lease_token = NULL, lease_expires_at = NULL,
    reclaims = j.reclaims + 1, reclaimed_at = (SELECT t FROM now_), run_s = NULL,
    errors = CASE WHEN jsonb_array_length(j.errors) >= $2 THEN j.errors - 0 ELSE j.errors END
             || jsonb_build_array(jsonb_build_object(
                    'attempt', j.attempt, 'at', (SELECT t FROM now_),
                    'message', 'worker ' || coalesce(j.locked_by, '?') || ' ' || $4::text,
                    'traceback', NULL))
FROM x WHERE j.id = x.id AND j.lane = $5 AND j.state IN ('pending', 'running')
RETURNING j.id, j.task, j.queue, j.state, j.attempt, j.max_attempts, j.correlation_id,
          j.locked_by

-- name: JOB_HEARTBEAT_MANY
-- Extend the leases of (id, token) pairs still running, marking those started ($6) that were
-- not yet and storing the progress records $7 given (NULL: none new); the pairs returned are
-- still held. SKIP LOCKED: a row another statement holds this instant (nearly always this
-- worker's own outcome batch, which moves it to history) is not waited for. Waiting on it
-- then met the row moved to another partition, which PostgreSQL refuses to lock (SQLSTATE
-- 40001), and under load every retry of a batch of hundreds met another. Never waiting, the
-- heartbeat cannot deadlock either, in any order. A skipped row still under its token is
-- reported held (a read of the statement's snapshot) and extended at the next beat; its
-- progress record, if this beat carried one, waits for the job's next (a finished job's
-- record rides its outcome instead).
-- $8: the live segments to look for the rows in (those the jobs were claimed from and the
-- long one, where a rotation moves a job that runs past its segment's turn; NULL: every one).
-- $9: the lane the jobs are in (a beat of several lanes is one statement a lane).
WITH now_ AS (SELECT coalesce($5::timestamptz, now()) AS t),
h AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $6::boolean[], $7::text[])
        AS h(id, token, started, progress)
),
locked AS MATERIALIZED (
    -- Lock order: every statement that may wait on several job rows takes them in ascending
    -- id, here, before it writes any. An UPDATE ... FROM locks rows in its plan's order (the
    -- input array's, the heap's or the index's, as the statistics of the moment decide), so
    -- the completion batch and the heartbeat of one worker, holding the same rows in
    -- opposite orders, deadlocked (a second's stall, an outage logged; the heartbeat now
    -- skips rows held instead, JOB_HEARTBEAT_MANY). FOR NO KEY UPDATE is
    -- what the UPDATE takes anyway. A row that left running meanwhile (its token cleared) is not
    -- locked; the token test, not state = 'running', keeps this off the lease index (a scan
    -- of every running row) and on the primary key.
    -- state IN (...) names the live partition alone (a planner's pruning), which no partial
    -- index matches.
    SELECT id FROM {s}.skiplock_jobs
    WHERE id = ANY($1::bigint[]) AND lane = $9 AND lease_token IS NOT NULL AND state IN ('pending', 'running')
      AND ($8::smallint[] IS NULL OR segment = ANY($8::smallint[]))
    ORDER BY id
    FOR NO KEY UPDATE SKIP LOCKED
),
beat AS (
    UPDATE {s}.skiplock_jobs j
    SET lease_expires_at = (SELECT t FROM now_) + make_interval(
            secs => coalesce(j.lease_s, coalesce(j.timeout, $3) + $4)),
        started_at = CASE WHEN h.started THEN coalesce(j.started_at, (SELECT t FROM now_))
                          ELSE j.started_at END,
        progress = coalesce(h.progress::jsonb, j.progress)
    FROM h
    WHERE j.id = ANY(ARRAY(SELECT id FROM locked)) AND j.id = h.id AND j.lane = $9
      AND j.lease_token = h.token
      AND j.state IN ('pending', 'running')
      AND ($8::smallint[] IS NULL OR j.segment = ANY($8::smallint[]))
    RETURNING j.id, j.lease_token
)
SELECT id, lease_token FROM beat
UNION ALL
SELECT j.id, j.lease_token FROM {s}.skiplock_jobs j JOIN h ON h.id = j.id
WHERE j.id = ANY($1::bigint[]) AND j.lane = $9 AND j.state IN ('pending', 'running')
  AND ($8::smallint[] IS NULL OR j.segment = ANY($8::smallint[]))
  AND j.lease_token = h.token
  -- an anti-join (a hash of the locked ids): <> ALL(ARRAY(...)) compared every pair, a
  -- second of CPU for a worker holding 5,000 leases
  AND NOT EXISTS (SELECT 1 FROM locked l WHERE l.id = j.id)

-- name: JOB_CANCEL_REQUESTED
-- Which of the jobs a worker holds a person asked to cancel.
SELECT id FROM {s}.skiplock_jobs
WHERE id = ANY($1::bigint[]) AND state = 'running' AND cancel_requested
