"""PostgreSQL's workflow storage: waiting jobs, their edges, batches, durable steps, signals.

Why apart from the job table (docs/design.md, "Workflows"): a job that waits (on parents or on
a signal) is a row in ``state = 'waiting'``, in a partition of its own, so claims never walk
it; everything else a workflow needs lives in four small tables that only workflow jobs
write, so a plain job's enqueue, claim and completion stay exactly as they were:

- ``skiplock_waits``: one row per waiting job, the counter of parents it still waits for (the
  row every release locks, so the last two parents finishing at the same instant on two
  workers decrement it one after the other and exactly one sees zero), what its first
  argument becomes when it is released, and the signal a parked job waits for;
- ``skiplock_deps``: one row per edge, resolved once (``parent_state`` set under the edge's
  own row lock);
- ``skiplock_parent_results``: a parent's result, kept once for every edge from it when they
  resolve, so a child's inputs outlive the parent's retention without a copy per edge (edges
  resolved before migration 23 keep their own copy, ``skiplock_deps.parent_result``, read
  first); it goes when the last edge from its parent does. A parent that succeeds again (a
  person retried it) and resolves new edges replaces it: every child then reads the newest;
- ``skiplock_batches`` and ``skiplock_batch_jobs``: a batch, its callbacks (jobs waiting on
  every member and on the batch's open gate) and its members. A member's row goes with its
  job (the prune after the job's), and the batch counts it from then on
  (``skiplock_batches.pruned_members``, migration 26): its counts keep every member it ever
  had, the pruned ones as ``gone``, so they stay whole for a callback that reads them. The
  batch goes once it is closed and has no member row and no callback left;
- ``skiplock_steps`` (a durable step's stored result, one row per job, name and occurrence:
  the third ``step("charge", ...)`` of a run is ``("charge", 3)`` in every run) and
  ``skiplock_signals`` (a job's mailbox: the signals of each name in the order they came,
  numbered from 1, and a wait's timeout in the place of the signal it waited for; the n-th
  ``wait_for(name)`` of a run takes entry n);
- ``skiplock_unreleased``: what the release of a job that ended while it waited (cancelled,
  or buried for the size of its parents' results) would have given it, for a retry.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..job_audit_sql import pg_action

FINAL = "('succeeded', 'cancelled', 'dead')"


JOBS_MISSING = """
-- Which of the ids $1 name no job (an unknown or pruned parent).
SELECT x.id FROM unnest($1::bigint[]) AS x(id)
WHERE NOT EXISTS (SELECT 1 FROM {s}.skiplock_jobs j WHERE j.id = x.id)
"""

ANCESTORS_MEET = """
-- Whether any of the jobs $2 is one of $1 or an ancestor of one (a new edge from $1's
-- members to $2's would close a cycle).
WITH RECURSIVE up(id) AS (
    SELECT unnest($1::bigint[])
    UNION
    SELECT d.parent_id FROM {s}.skiplock_deps d JOIN up ON d.child_id = up.id
)
SELECT EXISTS (SELECT 1 FROM up WHERE id = ANY($2::bigint[]))
"""

JOBS_TO_WAITING = """
-- Freshly inserted jobs (in this transaction, so no worker saw them) wait instead.
UPDATE {s}.skiplock_jobs SET state = 'waiting'
WHERE id = ANY($1::bigint[]) AND state = 'pending'
"""


WAITS_INSERT = """
INSERT INTO {s}.skiplock_waits (job_id, parents_left, pass_results, batch_id)
SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::bigint[])
"""

WAITS_ADD = """
-- More parents for waiting jobs (a batch's callbacks as members join).
UPDATE {s}.skiplock_waits w SET parents_left = w.parents_left + x.n
FROM unnest($1::bigint[], $2::int[]) AS x(id, n) WHERE w.job_id = x.id
"""

DEPS_INSERT = """
INSERT INTO {s}.skiplock_deps (child_id, parent_id, position, on_failure)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[])
ON CONFLICT DO NOTHING
"""

DEPS_RESOLVE = (
    """
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
      AND (p.state IS NULL OR p.state IN """
    + FINAL
    + """)
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
"""
)

WAITS_DECREMENT = """
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
"""


EDGE_RESULT = """coalesce({d}.parent_result, CASE WHEN {d}.parent_state = 'succeeded' THEN (
    SELECT k.result FROM {{s}}.skiplock_parent_results k WHERE k.parent_id = {d}.parent_id) END)"""
"""The result an edge ``{d}`` of skiplock_deps passes on (NULL: none; a resolved edge that
succeeded): its own copy if it has one (resolved before migration 23), else its parent's
kept result (skiplock_parent_results). Through ``str.format``: ``{{s}}`` stays the schema."""

GATHERED_SIZE = "coalesce(sum(octet_length(coalesce({result}, 'null'::jsonb)::text) + 1), 1) + 1"
"""The size in bytes of the list of results a release would give a child ('all'), from the
rows of its edges ``d`` (``{result}``: each edge's result): each result's JSON text summed
with a comma and the brackets, the list itself never built (a chord of 1,100 results of
250 kB would be a 275 MB value: jsonb refuses one over 256 MiB). The text is jsonb's, a
space after each comma and colon, so it counts a little over the compact JSON a client
writes."""

RELEASE_CHUNK = 1000
"""Open edges one release statement resolves at most: a fan-out's children become pending a
thousand at a time, each chunk committed (and claimable) while the next is written."""


def release_tail(*, limit: str, channel: str, now: str) -> str:
    """The CTEs that release the children of the parents in a CTE ``p(id, result jsonb)``
    that succeeded: their open edges resolved (locked first, in one order, at most ``limit``),
    each child's count going down under its wait row's lock, and the children at zero made
    pending with their parents' results in front (``channel`` NOTIFYed per queue, ``now`` the
    run_at floor). Defines ``resolved``, ``r`` (id, queue: released), ``stale`` (job_id) and
    ``woken``; used by the completion statement itself (postgres_sql.py) and by
    RELEASE_SUCCEEDED.

    A child whose count reached zero is released here only if its wait row is the version
    this statement's snapshot holds (``fresh``): then every other parent's edge was resolved
    by a transaction this snapshot sees, and so are their results. A release that committed
    while this one waited for the row's lock wrote results this snapshot cannot read; such a
    child is left at zero (``stale``) for CHILDREN_READY, a statement of its own whose
    snapshot is newer (and for the sweep, should the caller die first). An edge this very
    statement resolves holds its result only once the statement ends: the result comes from
    ``pm``, the parents' results by id (no read of the job table, whose partitions a plan
    would have to expand: planning the completion statement took 5 ms with two such reads).

    A child that takes the list of its parents' results ('all': a chord's body, one a chord)
    is left at zero for CHILDREN_READY too, which sums the list's size before it builds it
    (and buries a body over the payload bound): built here, the list of 1,100 results of
    250 kB was past jsonb's 256 MiB before anything could look at its size."""
    edge_result = f"""coalesce((SELECT pm.m FROM pm) -> d.parent_id::text,
                     {EDGE_RESULT.format(d="d")}, 'null'::jsonb)"""
    return f"""
, todo AS (
    SELECT d.ctid AS at FROM {{s}}.skiplock_deps d JOIN p ON d.parent_id = p.id
    WHERE d.parent_state IS NULL
    ORDER BY d.child_id, d.parent_id LIMIT {limit} FOR UPDATE OF d
), resolved AS (
    -- by ctid (stable while locked): a semi join with the locking CTE was planned as a
    -- nested loop over it, 4.5 million comparisons for a fan-out of 3,000
    UPDATE {{s}}.skiplock_deps d
    SET parent_state = 'succeeded', resolved_at = now()
    FROM todo WHERE d.ctid = todo.at
    RETURNING d.child_id, d.parent_id
), kept AS (
    -- each parent's result once, for all its edges (not a copy on each: a 253 kB result to
    -- 1,000 children was 271 MB of WAL), after its edges were locked and resolved
    INSERT INTO {{s}}.skiplock_parent_results AS k (parent_id, result)
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
    FROM {{s}}.skiplock_waits w
    JOIN (SELECT child_id, count(*)::int AS n FROM resolved GROUP BY child_id) c
      ON w.job_id = c.child_id
    JOIN {{s}}.skiplock_waits s ON s.job_id = w.job_id
    ORDER BY w.job_id FOR UPDATE OF w
), counted AS (
    -- three statements on disjoint rows (one statement may not change a row twice):
    -- counted down, gone at zero, or left at zero for a newer snapshot
    UPDATE {{s}}.skiplock_waits w SET parents_left = wlocked.left_ - wlocked.n
    FROM wlocked WHERE w.job_id = wlocked.job_id AND wlocked.left_ > wlocked.n
), z AS (
    DELETE FROM {{s}}.skiplock_waits w USING wlocked
    WHERE w.job_id = wlocked.job_id AND wlocked.left_ = wlocked.n AND wlocked.signal IS NULL
      AND wlocked.fresh
    RETURNING w.job_id, w.pass_results, w.batch_id
), stale AS (
    UPDATE {{s}}.skiplock_waits w SET parents_left = 0
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
    UPDATE {{s}}.skiplock_jobs j
    SET state = 'pending', run_at = greatest(j.run_at, coalesce({now}::timestamptz, now())),
        args = CASE z.pass_results
            WHEN 'previous' THEN jsonb_build_array(
                (SELECT {edge_result} FROM {{s}}.skiplock_deps d
                 WHERE d.child_id = j.id ORDER BY d.position LIMIT 1)) || j.args
            WHEN 'batch' THEN jsonb_build_array(z.batch_id) || j.args
            ELSE j.args END
    FROM z WHERE j.id = z.job_id AND j.state = 'waiting'
    RETURNING j.id, j.queue
), woken AS (
    SELECT pg_notify({channel}, q.queue) FROM (SELECT DISTINCT queue FROM r) q
)"""


RELEASE_SUCCEEDED = (
    """
-- The release of parents $1 that succeeded (a completion's own statement releases what it
-- can; this one the rest, a chunk of at most $4 open edges a call): see release_tail. One row:
-- how many edges it resolved (a full chunk: call again), the children released, their
-- queues, and the children left at zero for CHILDREN_READY.
--
-- Its transaction commits without waiting for its WAL to reach the disk (synchronous_commit
-- off, for this transaction alone): a chain's link waited for three flushes in a row (the
-- outcome, this release, the next claim). What it writes is derived from outcomes already
-- durable: a crash that loses it leaves the parents finished with their edges open, which
-- the sweep releases again, and the claim of a child it released flushes it first (the WAL
-- is one sequence).
WITH p AS (
    SELECT j.id, j.result FROM {s}.skiplock_jobs j
    WHERE j.id = ANY($1::bigint[]) AND j.state = 'succeeded'
), lazy AS (
    SELECT set_config('synchronous_commit', 'off', true)
)"""
    + release_tail(limit="$4", channel="$2", now="$3")
    + """
SELECT (SELECT count(*) FROM resolved) AS resolved_n,
       (SELECT array_agg(id) FROM r) AS released,
       (SELECT array_agg(DISTINCT queue) FROM r) AS woken,
       (SELECT array_agg(job_id) FROM stale) AS stale
WHERE (SELECT count(*) FROM woken) >= 0 AND (SELECT count(*) FROM lazy) >= 0
"""
)

_KEEP_UNRELEASED = """
    INSERT INTO {s}.skiplock_unreleased (job_id, pass_results, batch_id, ended_at)
    SELECT g.job_id, g.pass_results, g.batch_id, coalesce($3::timestamptz, now()) FROM gone g
    WHERE g.signal IS NULL AND g.job_id IN (SELECT id FROM ended)
    ON CONFLICT (job_id) DO NOTHING"""
"""The wait rows (``gone``: deleted, RETURNING them) of the jobs that ended waiting
(``ended``), kept in skiplock_unreleased: a retry waits for their parents again."""

CHILDREN_CANCEL = (
    """
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
), kept AS ("""
    + _KEEP_UNRELEASED
    + """
)
SELECT id FROM ended
"""
)

CHILDREN_READY = (
    """
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
               SELECT """
    + GATHERED_SIZE.format(result=EDGE_RESULT.format(d="d"))
    + """
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
                (SELECT coalesce("""
    + EDGE_RESULT.format(d="d")
    + """, 'null'::jsonb)
                 FROM {s}.skiplock_deps d
                 WHERE d.child_id = j.id ORDER BY d.position LIMIT 1)) || j.args
            WHEN 'all' THEN jsonb_build_array(
                (SELECT coalesce(jsonb_agg(coalesce("""
    + EDGE_RESULT.format(d="d")
    + """, 'null'::jsonb)
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
), kept AS ("""
    + _KEEP_UNRELEASED
    + """
), woken AS (
    SELECT pg_notify($2, q.queue) FROM (SELECT DISTINCT queue FROM r) q
)
SELECT id, queue, false AS buried FROM r WHERE (SELECT count(*) FROM woken) >= 0
UNION ALL SELECT id, NULL, true FROM ended
"""
)

UNRELEASED_TAKE = """
-- A retry's first look: what a job that ended waiting for its parents kept (its row locked
-- while finished, the kept row taken: the retry writes its wait row anew).
WITH j AS (
    SELECT id FROM {s}.skiplock_jobs WHERE id = $1 AND state IN ('cancelled', 'dead')
    FOR UPDATE
)
DELETE FROM {s}.skiplock_unreleased u USING j WHERE u.job_id = j.id
RETURNING u.pass_results, u.batch_id
"""

CHILD_EDGES = """
-- Every edge into a job a retry sends back to waiting, locked (in a release's order: by
-- parent), with its parent's state now ('gone': pruned).
SELECT d.parent_id, d.parent_state, d.on_failure, coalesce(j.state, 'gone')
FROM {s}.skiplock_deps d LEFT JOIN {s}.skiplock_jobs j ON j.id = d.parent_id
WHERE d.child_id = $1 ORDER BY d.parent_id
FOR UPDATE OF d
"""

EDGES_REOPEN = """
-- Edges resolved for a parent that failed, and that a person retried since: open again, so
-- the retried child waits for the parent's new outcome.
UPDATE {s}.skiplock_deps SET parent_state = NULL, parent_result = NULL, resolved_at = NULL
WHERE child_id = $1 AND parent_id = ANY($2::bigint[])
"""

JOB_REWAIT = (
    """
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
    audit = """
    + pg_action("coalesce($6::timestamptz, now())", "$5::text", "'retry'")
    + """
WHERE id = $1
"""
)

JOB_STATE_ERROR = """
SELECT state, errors -> -1 ->> 'message' FROM {s}.skiplock_jobs WHERE id = $1
"""

OPEN_PARENTS = """
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
"""

STRANDED_WAITS = """
-- The sweep's second look: waiting children whose count reached zero and who were left so
-- (a release that met a newer wait row leaves its child to CHILDREN_READY, and its caller
-- may die before that runs).
SELECT w.job_id FROM {s}.skiplock_waits w
WHERE w.parents_left = 0 AND w.signal IS NULL
ORDER BY w.job_id LIMIT $1
"""

_RESUME_DUE = """, gone AS (
    DELETE FROM {s}.skiplock_waits WHERE job_id IN (SELECT id FROM due)
), r AS (
    UPDATE {s}.skiplock_jobs j SET state = 'pending', run_at = coalesce($3::timestamptz, now())
    FROM due WHERE j.id = due.id AND j.state = 'waiting'
    RETURNING j.id, j.queue
), woken AS (
    SELECT pg_notify($2, q.queue) FROM (SELECT DISTINCT queue FROM r) q
)
SELECT id, queue FROM r WHERE (SELECT count(*) FROM woken) >= 0
"""
"""The end of a statement whose CTE ``due`` (ids) names parked jobs to run again now: their
wait rows go, they become pending, their queues are woken ($2 the channel, $3 now)."""

WAITS_EXPIRED = (
    """
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
)"""
    + _RESUME_DUE
)

WAIT_PREPARE = """
-- A running job about to park: record the signal it waits for (its name, and the entry of
-- that name's mailbox: its n-th wait for the name takes the n-th), under its lease.
INSERT INTO {s}.skiplock_waits (job_id, signal, signal_seq)
SELECT id, $3, $4 FROM {s}.skiplock_jobs
WHERE id = $1 AND lease_token = $2 AND state = 'running'
ON CONFLICT (job_id) DO UPDATE SET signal = EXCLUDED.signal, signal_seq = EXCLUDED.signal_seq
RETURNING job_id
"""

PARKED_RESUME = (
    """
-- Parked jobs whose signal came before they parked run again at once (the signal's sender
-- locked the row, so it either saw the job waiting or left its signal for this look).
WITH due AS (
    SELECT w.job_id AS id FROM {s}.skiplock_waits w
    WHERE w.job_id = ANY($1::bigint[]) AND w.signal IS NOT NULL
      AND EXISTS (SELECT 1 FROM {s}.skiplock_signals s
                  WHERE s.job_id = w.job_id AND s.name = w.signal
                    AND s.seq >= coalesce(w.signal_seq, 1))
)"""
    + _RESUME_DUE
)

PARKED_SIGNALLED = (
    """
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
)"""
    + _RESUME_DUE
)

JOB_LOCK_STATE = """
-- A signal's first step: the job's row locked (whatever its state), so a park and a signal
-- happen one after the other.
SELECT state FROM {s}.skiplock_jobs WHERE id = $1 FOR UPDATE
"""

SIGNAL_APPEND = """
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
"""

WAIT_OF = """
-- What the job waits for now: the signal's name and the entry of it (a wait on parents: no
-- signal).
SELECT signal, coalesce(signal_seq, 1) FROM {s}.skiplock_waits WHERE job_id = $1
"""

SIGNAL_WAKE = """
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
"""

JOB_AUDIT_ADD = (
    """
-- A person's action on the job, in its own trail (as retry and cancel record theirs).
UPDATE {s}.skiplock_jobs
SET audit = """
    + pg_action("coalesce($4::timestamptz, now())", "$2::text", "$3::text")
    + """
WHERE id = $1
"""
)

SIGNAL_TAKE = """
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
"""

STEP_GET = """
SELECT result::text FROM {s}.skiplock_steps WHERE job_id = $1 AND name = $2 AND seq = $3
"""

STEP_PUT = """
-- A step's result (its name's $3-th occurrence in the run), stored only while the job runs
-- under this lease (a worker that lost it stores nothing: the one that holds it now runs the
-- step, or finds it stored).
INSERT INTO {s}.skiplock_steps (job_id, name, seq, result)
SELECT id, $3, $5, $4::jsonb FROM {s}.skiplock_jobs
WHERE id = $1 AND lease_token = $2 AND state = 'running'
ON CONFLICT DO NOTHING
RETURNING job_id
"""

PARENT_RESULTS = (
    """
SELECT d.parent_id, d.parent_state, ("""
    + EDGE_RESULT.format(d="d")
    + """)::text
FROM {s}.skiplock_deps d WHERE d.child_id = $1 ORDER BY d.position
"""
)

JOB_PARENTS = """
-- A job's first $2 parents, in order (a chord's body has up to 10,000: a page shows a few).
SELECT d.parent_id, coalesce(j.state, d.parent_state, 'gone'), d.on_failure
FROM {s}.skiplock_deps d LEFT JOIN {s}.skiplock_jobs j ON j.id = d.parent_id
WHERE d.child_id = $1 ORDER BY d.position, d.parent_id LIMIT $2
"""

JOB_PARENT_COUNTS = """
-- Every parent of a job counted by its state.
SELECT coalesce(j.state, d.parent_state, 'gone') AS state, count(*)
FROM {s}.skiplock_deps d LEFT JOIN {s}.skiplock_jobs j ON j.id = d.parent_id
WHERE d.child_id = $1 GROUP BY 1 ORDER BY 1
"""

JOB_PARENTS_AFTER = """
-- A page of a job's parents by id, after id $2.
SELECT d.parent_id, coalesce(j.state, d.parent_state, 'gone'), d.on_failure
FROM {s}.skiplock_deps d LEFT JOIN {s}.skiplock_jobs j ON j.id = d.parent_id
WHERE d.child_id = $1 AND d.parent_id > $2 ORDER BY d.parent_id LIMIT $3
"""

JOB_CHILDREN = """
-- A job's children by id, after id $3 (0: from the first), $2 at most.
SELECT d.child_id, coalesce(j.state, 'gone'), d.on_failure
FROM {s}.skiplock_deps d LEFT JOIN {s}.skiplock_jobs j ON j.id = d.child_id
WHERE d.parent_id = $1 AND d.child_id > $3 ORDER BY d.child_id LIMIT $2
"""

JOB_WAIT = """
SELECT parents_left, signal, pass_results FROM {s}.skiplock_waits WHERE job_id = $1
"""

JOB_BATCH = """
SELECT batch_id FROM {s}.skiplock_batch_jobs WHERE job_id = $1
UNION SELECT id FROM {s}.skiplock_batches WHERE on_success = $1 OR on_complete = $1
LIMIT 1
"""

BATCH_INSERT = """
INSERT INTO {s}.skiplock_batches DEFAULT VALUES RETURNING id
"""

BATCH_SET_CALLBACKS = """
UPDATE {s}.skiplock_batches SET on_success = $2, on_complete = $3 WHERE id = $1
"""

BATCH_GET_LOCKED = """
SELECT closed_at IS NOT NULL, on_success, on_complete FROM {s}.skiplock_batches
WHERE id = $1 FOR UPDATE
"""

BATCH_CLOSE = """
UPDATE {s}.skiplock_batches SET closed_at = now() WHERE id = $1 AND closed_at IS NULL
RETURNING on_success, on_complete
"""

BATCH_ABORT = """
-- A batch whose block raised is closed as aborted (an open one only: a closed batch's
-- callbacks may be running already).
UPDATE {s}.skiplock_batches
SET closed_at = coalesce($2::timestamptz, now()), aborted_at = coalesce($2::timestamptz, now())
WHERE id = $1 AND closed_at IS NULL
RETURNING on_success, on_complete
"""

MEMBERS_CANCEL = """
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
"""

WAITS_DROP = """
DELETE FROM {s}.skiplock_waits WHERE job_id = ANY($1::bigint[])
"""

BATCH_MEMBERS_INSERT = """
INSERT INTO {s}.skiplock_batch_jobs (batch_id, job_id)
SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING
"""

BATCH_INFO = """
SELECT b.id, extract(epoch FROM b.created_at), extract(epoch FROM b.closed_at),
       b.on_success, b.on_complete,
       (SELECT coalesce(jsonb_object_agg(s.state, s.n), '{{}}'::jsonb)::text FROM (
            SELECT coalesce(j.state, 'gone') AS state, count(*) AS n
            FROM {s}.skiplock_batch_jobs m LEFT JOIN {s}.skiplock_jobs j ON j.id = m.job_id
            WHERE m.batch_id = b.id GROUP BY 1) s),
       extract(epoch FROM b.aborted_at), b.pruned_members
FROM {s}.skiplock_batches b WHERE b.id = $1
"""

WAIT_NEXT_TIMEOUT = """
-- Seconds from now ($1, NULL: the database's) until the first parked wait times out (<= 0:
-- one is due), NULL if no job is parked: a worker's wait timer sleeps until then. Parked
-- jobs only (the wait rows with a signal, a partial index), not every waiting child.
SELECT extract(epoch FROM min(j.run_at) - coalesce($1::timestamptz, now()))::float8
FROM {s}.skiplock_waits w JOIN {s}.skiplock_jobs j ON j.id = w.job_id
WHERE w.signal IS NOT NULL AND j.state = 'waiting'
"""

WAITING_LIST = """
-- Waiting jobs for a person: what each waits for (parents left, or a signal and until when).
SELECT j.id, j.task, j.queue, w.parents_left, w.signal, extract(epoch FROM j.run_at),
       extract(epoch FROM j.created_at)
FROM {s}.skiplock_jobs j LEFT JOIN {s}.skiplock_waits w ON w.job_id = j.id
WHERE j.state = 'waiting' ORDER BY j.id LIMIT $1
"""

GRAPH_EDGES = """
-- The edges that touch the jobs $1 (a step of the graph's walk outward from one job).
SELECT parent_id, child_id FROM {s}.skiplock_deps
WHERE parent_id = ANY($1::bigint[]) OR child_id = ANY($1::bigint[])
"""

GRAPH_NODES = """
SELECT id, task, state FROM {s}.skiplock_jobs WHERE id = ANY($1::bigint[])
"""


WORKFLOW_PRUNE = """
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
"""


@dataclass(frozen=True, slots=True)
class WorkflowStatements:
    """The statements above for one schema."""

    JOBS_MISSING: str
    ANCESTORS_MEET: str
    JOBS_TO_WAITING: str
    WAITS_INSERT: str
    WAITS_ADD: str
    DEPS_INSERT: str
    DEPS_RESOLVE: str
    WAITS_DECREMENT: str
    CHILDREN_CANCEL: str
    RELEASE_SUCCEEDED: str
    CHILDREN_READY: str
    OPEN_PARENTS: str
    STRANDED_WAITS: str
    WAITS_EXPIRED: str
    WAIT_PREPARE: str
    PARKED_RESUME: str
    PARKED_SIGNALLED: str
    JOB_LOCK_STATE: str
    SIGNAL_APPEND: str
    WAIT_OF: str
    SIGNAL_WAKE: str
    SIGNAL_TAKE: str
    JOB_AUDIT_ADD: str
    STEP_GET: str
    STEP_PUT: str
    PARENT_RESULTS: str
    JOB_PARENTS: str
    JOB_CHILDREN: str
    JOB_PARENT_COUNTS: str
    JOB_PARENTS_AFTER: str
    JOB_WAIT: str
    JOB_BATCH: str
    BATCH_INSERT: str
    BATCH_SET_CALLBACKS: str
    BATCH_GET_LOCKED: str
    BATCH_CLOSE: str
    BATCH_ABORT: str
    MEMBERS_CANCEL: str
    WAITS_DROP: str
    BATCH_MEMBERS_INSERT: str
    BATCH_INFO: str
    WAIT_NEXT_TIMEOUT: str
    WAITING_LIST: str
    GRAPH_EDGES: str
    GRAPH_NODES: str
    WORKFLOW_PRUNE: str
    UNRELEASED_TAKE: str
    CHILD_EDGES: str
    EDGES_REOPEN: str
    JOB_REWAIT: str
    JOB_STATE_ERROR: str

    @classmethod
    def for_schema(cls, schema: str) -> WorkflowStatements:
        quoted = f'"{schema}"'
        return cls(
            **{
                f.name: globals()[f.name].replace("{s}", quoted).replace("{{}}", "{}")
                for f in fields(cls)
            }
        )
