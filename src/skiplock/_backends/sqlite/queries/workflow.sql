-- name: JOBS_PRESENT
SELECT id FROM skiplock_jobs WHERE id IN (SELECT value FROM json_each(:ids))

-- name: ANCESTORS_MEET
WITH RECURSIVE up(id) AS (
    SELECT value FROM json_each(:from)
    UNION
    SELECT d.parent_id FROM skiplock_deps d JOIN up ON d.child_id = up.id
)
SELECT EXISTS (SELECT 1 FROM up WHERE id IN (SELECT value FROM json_each(:to)))

-- name: JOBS_TO_WAITING
UPDATE skiplock_jobs_live SET state = 'waiting'
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'pending'

-- name: WAIT_INSERT
INSERT INTO skiplock_waits (job_id, parents_left, pass_results, batch_id, created_at)
VALUES (?, ?, ?, ?, ?)

-- name: WAITS_ADD
UPDATE skiplock_waits SET parents_left = parents_left + ? WHERE job_id = ?

-- name: DEP_INSERT
INSERT OR IGNORE INTO skiplock_deps (child_id, parent_id, position, on_failure)
VALUES (?, ?, ?, ?)

-- name: PARENTS_STATE
-- Correlated lookups, not a LEFT JOIN of the view: a join materialises the view (every live
-- and day table, 24-89 ms at 10,000 rows) where a lookup by id probes each table's key.
SELECT x.value,
       (SELECT j.state FROM skiplock_jobs j WHERE j.id = x.value),
       (SELECT j.result FROM skiplock_jobs j WHERE j.id = x.value)
FROM json_each(:ids) x

-- name: EDGES_RESOLVE
-- A finished parent's open edges resolved in one statement (a fan-out's 9,999: one statement,
-- where one a child took 0.2 s); an edge whose child waits for a failed parent's retry
-- ('wait') stays open, unless the parent is gone (pruned): no retry can come.
UPDATE skiplock_deps SET parent_state = :final, resolved_at = :now
WHERE parent_id = :parent AND parent_state IS NULL
  AND (:final IN ('succeeded', 'gone') OR on_failure <> 'wait')
RETURNING child_id, on_failure

-- name: RESULT_KEEP
-- A parent's result, once for all its edges (postgres/workflow.py: skiplock_parent_results).
INSERT INTO skiplock_parent_results (parent_id, result) VALUES (:parent, :result)
ON CONFLICT (parent_id) DO UPDATE SET result = excluded.result
WHERE result IS NOT excluded.result

-- name: WAITS_DECREMENT
-- Count resolved parents off (:counts, a JSON object: child id -> parents resolved), in one
-- statement for the batch.
UPDATE skiplock_waits SET parents_left = parents_left - x.n
FROM (SELECT CAST(key AS INTEGER) AS id, value AS n FROM json_each(:counts)) x
WHERE skiplock_waits.job_id = x.id
RETURNING job_id, parents_left

-- name: WAITS_READY
SELECT job_id, pass_results, batch_id FROM skiplock_waits
WHERE job_id IN (SELECT value FROM json_each(:ids)) AND parents_left = 0 AND signal IS NULL

-- name: WAITS_DELETE
DELETE FROM skiplock_waits WHERE job_id IN (SELECT value FROM json_each(:ids))

-- name: CHILDREN_READY
-- Children whose arguments stay as they are, pending in one statement.
UPDATE skiplock_jobs_live SET state = 'pending', run_at = max(run_at, :now)
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'waiting'
RETURNING id, queue

-- name: CHILDREN_READY_PREVIOUS
-- Children given their one parent's result first ('previous': a chain's link, a fan-out's
-- children), pending in one statement (one at a time, three statements each, a fan-out's
-- 9,999 took 0.59 s).
UPDATE skiplock_jobs_live
SET state = 'pending', run_at = max(run_at, :now),
    args = '[' || coalesce((SELECT coalesce(coalesce(d.parent_result, CASE WHEN d.parent_state = 'succeeded' THEN (
    SELECT k.result FROM skiplock_parent_results k WHERE k.parent_id = d.parent_id) END), 'null') FROM skiplock_deps d
                            WHERE d.child_id = skiplock_jobs_live.id
                            ORDER BY d.position LIMIT 1), 'null')
           || CASE WHEN json_array_length(args) = 0 THEN ']'
                   ELSE ',' || substr(trim(args), 2) END
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'waiting'
RETURNING id, queue

-- name: CHILD_CANCEL
UPDATE skiplock_jobs_live
SET state = 'cancelled', finished_at = :now, errors = json_insert(errors, '$[#]', json(:error))
WHERE id = :id AND state = 'waiting'

-- name: WAIT_DELETE
DELETE FROM skiplock_waits WHERE job_id = ?

-- name: CHILD_RESULTS
SELECT coalesce(coalesce(d.parent_result, CASE WHEN d.parent_state = 'succeeded' THEN (
    SELECT k.result FROM skiplock_parent_results k WHERE k.parent_id = d.parent_id) END), 'null')
FROM skiplock_deps d WHERE d.child_id = ? ORDER BY d.position

-- name: CHILD_RESULTS_SIZE
-- How many parents a body has, and the bytes the list of their results would take (each
-- result's JSON text summed with a comma and the brackets: the list is never built).
SELECT count(*), coalesce(sum(length(CAST(coalesce(coalesce(d.parent_result, CASE WHEN d.parent_state = 'succeeded' THEN (
    SELECT k.result FROM skiplock_parent_results k WHERE k.parent_id = d.parent_id) END), 'null') AS BLOB)) + 1), 1) + 1
FROM skiplock_deps d WHERE d.child_id = ?

-- name: CHILD_BURY
-- A body whose list of results is over the bound: dead, never run, the reason its error.
UPDATE skiplock_jobs_live
SET state = 'dead', finished_at = :now, errors = json_insert(errors, '$[#]', json(:error))
WHERE id = :id AND state = 'waiting'

-- name: UNRELEASED_KEEP
-- A job that ended while it waited for its parents (cancelled, or buried): what its release
-- would have given it, kept for a retry (it waits for them again), from its wait row.
INSERT OR IGNORE INTO skiplock_unreleased (job_id, pass_results, batch_id, ended_at)
SELECT job_id, pass_results, batch_id, :now FROM skiplock_waits
WHERE job_id = :id AND signal IS NULL

-- name: UNRELEASED_KEEP_WAITING
-- UNRELEASED_KEEP for a job a person cancels, if it waits for its parents.
INSERT OR IGNORE INTO skiplock_unreleased (job_id, pass_results, batch_id, ended_at)
SELECT w.job_id, w.pass_results, w.batch_id, :now
FROM skiplock_waits w JOIN skiplock_jobs_live j ON j.id = w.job_id
WHERE w.job_id = :id AND w.signal IS NULL AND j.state = 'waiting'

-- name: CHILD_READY
UPDATE skiplock_jobs_live SET state = 'pending', run_at = max(run_at, :now),
    args = coalesce(:args, args)
WHERE id = :id AND state = 'waiting'
RETURNING id, queue

-- name: UNRELEASED_GET
SELECT u.pass_results, u.batch_id FROM skiplock_unreleased u
WHERE u.job_id = :id
  AND EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id = :id AND j.state IN ('cancelled', 'dead'))

-- name: UNRELEASED_DELETE
DELETE FROM skiplock_unreleased WHERE job_id = :id

-- name: CHILD_EDGES
SELECT d.parent_id, d.parent_state, d.on_failure,
       coalesce((SELECT j.state FROM skiplock_jobs j WHERE j.id = d.parent_id), 'gone')
FROM skiplock_deps d WHERE d.child_id = ? ORDER BY d.parent_id

-- name: EDGES_REOPEN
UPDATE skiplock_deps SET parent_state = NULL, parent_result = NULL, resolved_at = NULL
WHERE child_id = :child AND parent_id IN (SELECT value FROM json_each(:parents))

-- name: WAIT_REWRITE
INSERT INTO skiplock_waits (job_id, parents_left, pass_results, batch_id, created_at)
VALUES (:id, :left, :pass_results, :batch_id, :now)
ON CONFLICT (job_id) DO UPDATE
SET parents_left = excluded.parents_left, pass_results = excluded.pass_results,
    batch_id = excluded.batch_id, signal = NULL

-- name: JOB_REWAIT
-- (JOB_REWAIT in postgres/queries/workflow.sql)
UPDATE skiplock_jobs_live
SET state = 'waiting', attempt = 0, run_at = :now, finished_at = NULL, result = NULL,
    progress = NULL, lease_token = NULL, lease_expires_at = NULL, cancel_requested = 0,
    parked = NULL,
    audit = CASE WHEN json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) < 20
        THEN json_insert(audit, '$[#]', json_object('at', :now, 'who', :who, 'what', 'retry'))
        ELSE (SELECT json_group_array(json(kept.v)) FROM (
            SELECT -1 AS k, json_object(
                'at', json_extract(audit, '$[' || (json_array_length(audit) - 20) || '].at'),
                'who', 'skiplock',
                'what', printf('%d earlier actions left out', coalesce(json_extract(audit, '$[0].omitted'), 0) + (json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)),
                'omitted', coalesce(json_extract(audit, '$[0].omitted'), 0) + (json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)) AS v
            UNION ALL
            SELECT e.key, e.value FROM json_each(audit) e WHERE e.key >= json_array_length(audit) - 20 + 1
            UNION ALL
            SELECT 9223372036854775807, json_object('at', :now, 'who', :who, 'what', 'retry')
            ORDER BY k) kept) END
WHERE id = :id

-- name: JOB_STATE_ERROR
SELECT state, CASE WHEN json_valid(errors) THEN json_extract(errors, '$[#-1].message') END
FROM skiplock_jobs WHERE id = ?

-- name: OPEN_PARENTS
-- (OPEN_PARENTS in postgres/queries/workflow.sql says why each condition)
SELECT DISTINCT d.parent_id FROM skiplock_deps d
WHERE d.parent_state IS NULL
  AND NOT EXISTS (SELECT 1 FROM skiplock_jobs_live j
                  WHERE j.id = d.parent_id AND j.state IN ('pending', 'running', 'waiting'))
  AND (d.on_failure <> 'wait'
       OR NOT EXISTS (SELECT 1 FROM skiplock_jobs j
                      WHERE j.id = d.parent_id AND j.state IN ('dead', 'cancelled')))
LIMIT :most

-- name: STRANDED_WAITS
-- Waiting children at zero parents left so (the sweep's second look; SQLite's release never
-- leaves one, but a flow is written once for both).
SELECT job_id FROM skiplock_waits WHERE parents_left = 0 AND signal IS NULL
ORDER BY job_id LIMIT :most

-- name: WAITS_EXPIRED
SELECT j.id, w.signal, coalesce(w.signal_seq, 1)
FROM skiplock_jobs_live j JOIN skiplock_waits w ON w.job_id = j.id
WHERE j.state = 'waiting' AND w.signal IS NOT NULL AND j.run_at <= :now
ORDER BY j.run_at LIMIT :most

-- name: TIMEOUT_MARK
-- The timeout takes the mailbox entry the wait waits for (a signal stored there first wins).
INSERT OR IGNORE INTO skiplock_signals (job_id, name, seq, kind, at, taken)
VALUES (?, ?, ?, 'timeout', ?, 0)

-- name: WAIT_NEXT_TIMEOUT
SELECT min(j.run_at) - :now
FROM skiplock_waits w JOIN skiplock_jobs_live j ON j.id = w.job_id
WHERE w.signal IS NOT NULL AND j.state = 'waiting'

-- name: JOB_RESUME
UPDATE skiplock_jobs_live SET state = 'pending', run_at = :now
WHERE id = :id AND state = 'waiting'
RETURNING queue

-- name: WAIT_PREPARE
INSERT INTO skiplock_waits (job_id, signal, signal_seq, created_at)
SELECT id, :name, :seq, :now FROM skiplock_jobs_live
WHERE id = :id AND lease_token = :token AND state = 'running'
ON CONFLICT (job_id) DO UPDATE SET signal = excluded.signal, signal_seq = excluded.signal_seq
RETURNING job_id

-- name: PARKED_SIGNALLED
SELECT w.job_id FROM skiplock_waits w
WHERE w.job_id IN (SELECT value FROM json_each(:ids)) AND w.signal IS NOT NULL
  AND EXISTS (SELECT 1 FROM skiplock_signals s
              WHERE s.job_id = w.job_id AND s.name = w.signal
                AND s.seq >= coalesce(w.signal_seq, 1))

-- name: PARKED_SIGNALLED_ANY
-- The sweep's look for parked jobs whose signal is stored all the same (PARKED_SIGNALLED
-- in postgres/queries/workflow.sql says when).
SELECT w.job_id FROM skiplock_waits w JOIN skiplock_jobs_live j ON j.id = w.job_id
WHERE w.signal IS NOT NULL AND j.state = 'waiting'
  AND EXISTS (SELECT 1 FROM skiplock_signals s
              WHERE s.job_id = w.job_id AND s.name = w.signal
                AND s.seq >= coalesce(w.signal_seq, 1))
ORDER BY w.job_id LIMIT :most

-- name: JOB_STATE
SELECT state FROM skiplock_jobs WHERE id = ?

-- name: SIGNAL_APPEND
-- (SIGNAL_APPEND in postgres/queries/workflow.sql: none written past :most signals no wait took)
INSERT INTO skiplock_signals (job_id, name, seq, kind, payload, at, sender, taken)
SELECT :id, :name, coalesce(max(seq), 0) + 1, 'signal', :payload, :now, :who, 0
FROM skiplock_signals WHERE job_id = :id AND name = :name
HAVING (SELECT count(*) FROM skiplock_signals u
        WHERE u.job_id = :id AND u.kind = 'signal' AND u.taken = 0) < :most
RETURNING seq

-- name: WAIT_OF
SELECT signal, coalesce(signal_seq, 1) FROM skiplock_waits WHERE job_id = ?

-- name: JOB_AUDIT_ADD
-- A person's action on a live job, in its own trail (JOB_AUDIT_ADD in
-- postgres/queries/workflow.sql).
UPDATE skiplock_jobs_live
SET audit = CASE WHEN json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) < 20
        THEN json_insert(audit, '$[#]', json_object('at', :now, 'who', :who, 'what', :what))
        ELSE (SELECT json_group_array(json(kept.v)) FROM (
            SELECT -1 AS k, json_object(
                'at', json_extract(audit, '$[' || (json_array_length(audit) - 20) || '].at'),
                'who', 'skiplock',
                'what', printf('%d earlier actions left out', coalesce(json_extract(audit, '$[0].omitted'), 0) + (json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)),
                'omitted', coalesce(json_extract(audit, '$[0].omitted'), 0) + (json_array_length(audit) - (CASE WHEN json_type(audit, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END) + 1 - 20)) AS v
            UNION ALL
            SELECT e.key, e.value FROM json_each(audit) e WHERE e.key >= json_array_length(audit) - 20 + 1
            UNION ALL
            SELECT 9223372036854775807, json_object('at', :now, 'who', :who, 'what', :what)
            ORDER BY k) kept) END
WHERE id = :id

-- name: SIGNAL_GET
SELECT kind, payload, sender, at, taken FROM skiplock_signals
WHERE job_id = ? AND name = ? AND seq = ?

-- name: SIGNAL_TAKEN
UPDATE skiplock_signals SET taken = 1 WHERE job_id = ? AND name = ? AND seq = ?

-- name: STEP_GET
SELECT result FROM skiplock_steps WHERE job_id = ? AND name = ? AND seq = ?

-- name: STEP_PUT
INSERT OR IGNORE INTO skiplock_steps (job_id, name, seq, result, done_at)
SELECT id, :name, :seq, :result, :now FROM skiplock_jobs_live
WHERE id = :id AND lease_token = :token AND state = 'running'

-- name: PARENT_RESULTS
SELECT d.parent_id, d.parent_state, coalesce(d.parent_result, CASE WHEN d.parent_state = 'succeeded' THEN (
    SELECT k.result FROM skiplock_parent_results k WHERE k.parent_id = d.parent_id) END)
FROM skiplock_deps d WHERE d.child_id = ? ORDER BY d.position

-- name: JOB_PARENTS
-- (postgres/queries/workflow.sql says what each of these reads)
SELECT d.parent_id, coalesce((SELECT j.state FROM skiplock_jobs j WHERE j.id = d.parent_id),
                d.parent_state, 'gone'), d.on_failure
FROM skiplock_deps d
WHERE d.child_id = ? ORDER BY d.position, d.parent_id LIMIT ?

-- name: JOB_PARENT_COUNTS
SELECT coalesce((SELECT j.state FROM skiplock_jobs j WHERE j.id = d.parent_id),
                d.parent_state, 'gone') AS state, count(*)
FROM skiplock_deps d WHERE d.child_id = ? GROUP BY 1 ORDER BY 1

-- name: JOB_PARENTS_AFTER
SELECT d.parent_id, coalesce((SELECT j.state FROM skiplock_jobs j WHERE j.id = d.parent_id),
                d.parent_state, 'gone'), d.on_failure
FROM skiplock_deps d
WHERE d.child_id = ? AND d.parent_id > ? ORDER BY d.parent_id LIMIT ?

-- name: JOB_CHILDREN
SELECT d.child_id,
       coalesce((SELECT j.state FROM skiplock_jobs j WHERE j.id = d.child_id), 'gone'),
       d.on_failure
FROM skiplock_deps d
WHERE d.parent_id = ? AND d.child_id > ? ORDER BY d.child_id LIMIT ?

-- name: JOB_WAIT
SELECT parents_left, signal, pass_results FROM skiplock_waits WHERE job_id = ?

-- name: JOB_BATCH
SELECT batch_id FROM skiplock_batch_jobs WHERE job_id = :id
UNION SELECT id FROM skiplock_batches WHERE on_success = :id OR on_complete = :id
LIMIT 1

-- name: BATCH_INSERT
INSERT INTO skiplock_batches (created_at) VALUES (?) RETURNING id

-- name: BATCH_SET_CALLBACKS
UPDATE skiplock_batches SET on_success = ?, on_complete = ? WHERE id = ?

-- name: BATCH_GET
SELECT closed_at IS NOT NULL, on_success, on_complete FROM skiplock_batches WHERE id = ?

-- name: BATCH_CLOSE
UPDATE skiplock_batches SET closed_at = ? WHERE id = ? AND closed_at IS NULL
RETURNING on_success, on_complete

-- name: BATCH_ABORT
UPDATE skiplock_batches SET closed_at = :now, aborted_at = :now
WHERE id = :id AND closed_at IS NULL
RETURNING on_success, on_complete

-- name: MEMBERS_CANCEL
-- An aborted batch's members that never started (MEMBERS_CANCEL in postgres/queries/workflow.sql).
UPDATE skiplock_jobs_live
SET state = 'cancelled', finished_at = :now, errors = json_insert(errors, '$[#]', json(:error))
WHERE id IN (SELECT job_id FROM skiplock_batch_jobs WHERE batch_id = :batch)
  AND state IN ('pending', 'waiting') AND attempted_at IS NULL
RETURNING id

-- name: BATCH_MEMBER_INSERT
INSERT OR IGNORE INTO skiplock_batch_jobs (batch_id, job_id) VALUES (?, ?)

-- name: BATCH_INFO
SELECT b.id, b.created_at, b.closed_at, b.on_success, b.on_complete,
       (SELECT json_group_object(s.state, s.n) FROM (
            SELECT coalesce((SELECT j.state FROM skiplock_jobs j WHERE j.id = m.job_id),
                            'gone') AS state,
                   count(*) AS n
            FROM skiplock_batch_jobs m
            WHERE m.batch_id = b.id GROUP BY 1) s),
       b.aborted_at, b.pruned_members
FROM skiplock_batches b WHERE b.id = ?

-- name: WAITING_LIST
SELECT j.id, j.task, j.queue, w.parents_left, w.signal, j.run_at, j.created_at
FROM skiplock_jobs_live j LEFT JOIN skiplock_waits w ON w.job_id = j.id
WHERE j.state = 'waiting' ORDER BY j.id LIMIT ?

-- name: GRAPH_EDGES
SELECT parent_id, child_id FROM skiplock_deps
WHERE parent_id IN (SELECT value FROM json_each(:ids))
   OR child_id IN (SELECT value FROM json_each(:ids))

-- name: GRAPH_NODES
SELECT id, task, state FROM skiplock_jobs WHERE id IN (SELECT value FROM json_each(:ids))

-- name: ANY_OPEN_EDGE
SELECT EXISTS (SELECT 1 FROM skiplock_deps WHERE parent_state IS NULL)

-- name: BATCH_MEMBERS_PRUNED
-- Each batch adds how many of its members this prune deletes to its pruned_members (they
-- count as 'gone' while it lasts); run first in WORKFLOW_PRUNE's transaction (nothing there
-- before the members' delete changes which rows it picks).
UPDATE skiplock_batches AS b SET pruned_members = b.pruned_members + g.n
FROM (SELECT m.batch_id, count(*) AS n FROM skiplock_batch_jobs m
      WHERE m.rowid IN (
    SELECT x.rowid FROM skiplock_batch_jobs x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id = x.job_id)
    ORDER BY x.rowid LIMIT :most)
      GROUP BY m.batch_id) AS g
WHERE b.id = g.batch_id

-- name: WORKFLOW_PRUNE_STEPS
DELETE FROM skiplock_steps WHERE rowid IN (
    SELECT x.rowid FROM skiplock_steps x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id = x.job_id) LIMIT :most)

-- name: WORKFLOW_PRUNE_SIGNALS
DELETE FROM skiplock_signals WHERE rowid IN (
    SELECT x.rowid FROM skiplock_signals x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id = x.job_id) LIMIT :most)

-- name: WORKFLOW_PRUNE_DEPS
DELETE FROM skiplock_deps WHERE rowid IN (
    SELECT x.rowid FROM skiplock_deps x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id = x.child_id) LIMIT :most)

-- name: WORKFLOW_PRUNE_WAITS
DELETE FROM skiplock_waits WHERE job_id IN (
    SELECT x.job_id FROM skiplock_waits x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs_live j
                      WHERE j.id = x.job_id AND j.state IN ('waiting', 'running'))
    LIMIT :most)

-- name: WORKFLOW_PRUNE_BATCH_JOBS
DELETE FROM skiplock_batch_jobs WHERE rowid IN (
    SELECT x.rowid FROM skiplock_batch_jobs x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id = x.job_id)
    ORDER BY x.rowid LIMIT :most)

-- name: WORKFLOW_PRUNE_BATCHES
DELETE FROM skiplock_batches WHERE id IN (
    SELECT x.id FROM skiplock_batches x
    WHERE x.closed_at IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM skiplock_batch_jobs m WHERE m.batch_id = x.id)
      AND NOT EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id IN (x.on_success, x.on_complete))
    LIMIT :most)

-- name: WORKFLOW_PRUNE_PARENT_RESULTS
DELETE FROM skiplock_parent_results WHERE parent_id IN (
    SELECT x.parent_id FROM skiplock_parent_results x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_deps d WHERE d.parent_id = x.parent_id)
    LIMIT :most)

-- name: WORKFLOW_PRUNE_UNRELEASED
DELETE FROM skiplock_unreleased WHERE job_id IN (
    SELECT x.job_id FROM skiplock_unreleased x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs j
                      WHERE j.id = x.job_id AND j.state IN ('cancelled', 'dead'))
    LIMIT :most)

-- name: JOB_ARGS
SELECT args FROM skiplock_jobs_live WHERE id = ?
