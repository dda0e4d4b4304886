"""SQLite's workflow storage: the same tables as PostgreSQL's (``postgres_workflow_sql.py``
says why each exists). A waiting job stays in ``skiplock_jobs_live`` with ``state =
'waiting'``: the claim indexes are partial on ``pending``, so claims never read it.

SQLite cannot alter a CHECK; the live table's state CHECK is widened by rewriting its stored
definition (``widen_state_check``), the procedure SQLite documents for loosening a constraint
every stored row already meets. Times are Unix seconds, as in every other SQLite table.
"""

from __future__ import annotations

import sqlite3

from .job_audit_sql import sqlite_action

_OLD_CHECK = "CHECK (state IN ('pending', 'running', 'succeeded', 'cancelled', 'dead'))"
_NEW_CHECK = "CHECK (state IN ('pending', 'running', 'succeeded', 'cancelled', 'dead', 'waiting'))"


def widen_state_check(conn: sqlite3.Connection) -> None:
    """Let the live table hold ``waiting`` rows: its stored CREATE TABLE's state CHECK gains
    the word (sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema Changes":
    a constraint every existing row meets may be loosened by editing the schema text, then
    bumping ``schema_version`` so every connection reads it again). Runs inside the
    migration's transaction."""
    (version,) = conn.execute("PRAGMA schema_version").fetchone()
    conn.execute("PRAGMA writable_schema = ON")
    try:
        conn.execute(
            "UPDATE sqlite_master SET sql = replace(sql, ?, ?) "
            "WHERE type = 'table' AND name = 'skiplock_jobs_live'",
            (_OLD_CHECK, _NEW_CHECK),
        )
        conn.execute(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        conn.execute("PRAGMA writable_schema = OFF")


JOBS_PRESENT = """
SELECT id FROM skiplock_jobs WHERE id IN (SELECT value FROM json_each(:ids))
"""

ANCESTORS_MEET = """
WITH RECURSIVE up(id) AS (
    SELECT value FROM json_each(:from)
    UNION
    SELECT d.parent_id FROM skiplock_deps d JOIN up ON d.child_id = up.id
)
SELECT EXISTS (SELECT 1 FROM up WHERE id IN (SELECT value FROM json_each(:to)))
"""

JOBS_TO_WAITING = """
UPDATE skiplock_jobs_live SET state = 'waiting'
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'pending'
"""

WAIT_INSERT = """
INSERT INTO skiplock_waits (job_id, parents_left, pass_results, batch_id, created_at)
VALUES (?, ?, ?, ?, ?)
"""

WAITS_ADD = "UPDATE skiplock_waits SET parents_left = parents_left + ? WHERE job_id = ?"

DEP_INSERT = """
INSERT OR IGNORE INTO skiplock_deps (child_id, parent_id, position, on_failure)
VALUES (?, ?, ?, ?)
"""

PARENTS_STATE = """
-- Correlated lookups, not a LEFT JOIN of the view: a join materialises the view (every live
-- and day table, 24-89 ms at 10,000 rows) where a lookup by id probes each table's key.
SELECT x.value,
       (SELECT j.state FROM skiplock_jobs j WHERE j.id = x.value),
       (SELECT j.result FROM skiplock_jobs j WHERE j.id = x.value)
FROM json_each(:ids) x
"""

EDGES_RESOLVE = """
-- A finished parent's open edges resolved in one statement (a fan-out's 9,999: one statement,
-- where one a child took 0.2 s); an edge whose child waits for a failed parent's retry
-- ('wait') stays open, unless the parent is gone (pruned): no retry can come.
UPDATE skiplock_deps SET parent_state = :final, resolved_at = :now
WHERE parent_id = :parent AND parent_state IS NULL
  AND (:final IN ('succeeded', 'gone') OR on_failure <> 'wait')
RETURNING child_id, on_failure
"""

RESULT_KEEP = """
-- A parent's result, once for all its edges (postgres_workflow_sql.py: skiplock_parent_results).
INSERT INTO skiplock_parent_results (parent_id, result) VALUES (:parent, :result)
ON CONFLICT (parent_id) DO UPDATE SET result = excluded.result
WHERE result IS NOT excluded.result
"""

EDGE_RESULT = """coalesce({d}.parent_result, CASE WHEN {d}.parent_state = 'succeeded' THEN (
    SELECT k.result FROM skiplock_parent_results k WHERE k.parent_id = {d}.parent_id) END)"""
"""The result an edge ``{d}`` passes on (postgres_workflow_sql.EDGE_RESULT)."""

WAITS_DECREMENT = """
-- Count resolved parents off (:counts, a JSON object: child id -> parents resolved), in one
-- statement for the batch.
UPDATE skiplock_waits SET parents_left = parents_left - x.n
FROM (SELECT CAST(key AS INTEGER) AS id, value AS n FROM json_each(:counts)) x
WHERE skiplock_waits.job_id = x.id
RETURNING job_id, parents_left
"""

WAITS_READY = """
SELECT job_id, pass_results, batch_id FROM skiplock_waits
WHERE job_id IN (SELECT value FROM json_each(:ids)) AND parents_left = 0 AND signal IS NULL
"""

WAITS_DELETE = "DELETE FROM skiplock_waits WHERE job_id IN (SELECT value FROM json_each(:ids))"

CHILDREN_READY = """
-- Children whose arguments stay as they are, pending in one statement.
UPDATE skiplock_jobs_live SET state = 'pending', run_at = max(run_at, :now)
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'waiting'
RETURNING id, queue
"""

CHILDREN_READY_PREVIOUS = (
    """
-- Children given their one parent's result first ('previous': a chain's link, a fan-out's
-- children), pending in one statement (one at a time, three statements each, a fan-out's
-- 9,999 took 0.59 s).
UPDATE skiplock_jobs_live
SET state = 'pending', run_at = max(run_at, :now),
    args = '[' || coalesce((SELECT coalesce("""
    + EDGE_RESULT.format(d="d")
    + """, 'null') FROM skiplock_deps d
                            WHERE d.child_id = skiplock_jobs_live.id
                            ORDER BY d.position LIMIT 1), 'null')
           || CASE WHEN json_array_length(args) = 0 THEN ']'
                   ELSE ',' || substr(trim(args), 2) END
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'waiting'
RETURNING id, queue
"""
)

CHILD_CANCEL = """
UPDATE skiplock_jobs_live
SET state = 'cancelled', finished_at = :now, errors = json_insert(errors, '$[#]', json(:error))
WHERE id = :id AND state = 'waiting'
"""

WAIT_DELETE = "DELETE FROM skiplock_waits WHERE job_id = ?"

CHILD_RESULTS = (
    "SELECT coalesce("
    + EDGE_RESULT.format(d="d")
    + """, 'null')
FROM skiplock_deps d WHERE d.child_id = ? ORDER BY d.position
"""
)

CHILD_RESULTS_SIZE = (
    """
-- How many parents a body has, and the bytes the list of their results would take (each
-- result's JSON text summed with a comma and the brackets: the list is never built).
SELECT count(*), coalesce(sum(length(CAST(coalesce("""
    + EDGE_RESULT.format(d="d")
    + """, 'null') AS BLOB)) + 1), 1) + 1
FROM skiplock_deps d WHERE d.child_id = ?
"""
)

CHILD_BURY = """
-- A body whose list of results is over the bound: dead, never run, the reason its error.
UPDATE skiplock_jobs_live
SET state = 'dead', finished_at = :now, errors = json_insert(errors, '$[#]', json(:error))
WHERE id = :id AND state = 'waiting'
"""

UNRELEASED_KEEP = """
-- A job that ended while it waited for its parents (cancelled, or buried): what its release
-- would have given it, kept for a retry (it waits for them again), from its wait row.
INSERT OR IGNORE INTO skiplock_unreleased (job_id, pass_results, batch_id, ended_at)
SELECT job_id, pass_results, batch_id, :now FROM skiplock_waits
WHERE job_id = :id AND signal IS NULL
"""

UNRELEASED_KEEP_WAITING = """
-- UNRELEASED_KEEP for a job a person cancels, if it waits for its parents.
INSERT OR IGNORE INTO skiplock_unreleased (job_id, pass_results, batch_id, ended_at)
SELECT w.job_id, w.pass_results, w.batch_id, :now
FROM skiplock_waits w JOIN skiplock_jobs_live j ON j.id = w.job_id
WHERE w.job_id = :id AND w.signal IS NULL AND j.state = 'waiting'
"""

CHILD_READY = """
UPDATE skiplock_jobs_live SET state = 'pending', run_at = max(run_at, :now),
    args = coalesce(:args, args)
WHERE id = :id AND state = 'waiting'
RETURNING id, queue
"""

UNRELEASED_GET = """
SELECT u.pass_results, u.batch_id FROM skiplock_unreleased u
WHERE u.job_id = :id
  AND EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id = :id AND j.state IN ('cancelled', 'dead'))
"""

UNRELEASED_DELETE = "DELETE FROM skiplock_unreleased WHERE job_id = :id"

CHILD_EDGES = """
SELECT d.parent_id, d.parent_state, d.on_failure,
       coalesce((SELECT j.state FROM skiplock_jobs j WHERE j.id = d.parent_id), 'gone')
FROM skiplock_deps d WHERE d.child_id = ? ORDER BY d.parent_id
"""

EDGES_REOPEN = """
UPDATE skiplock_deps SET parent_state = NULL, parent_result = NULL, resolved_at = NULL
WHERE child_id = :child AND parent_id IN (SELECT value FROM json_each(:parents))
"""

WAIT_REWRITE = """
INSERT INTO skiplock_waits (job_id, parents_left, pass_results, batch_id, created_at)
VALUES (:id, :left, :pass_results, :batch_id, :now)
ON CONFLICT (job_id) DO UPDATE
SET parents_left = excluded.parents_left, pass_results = excluded.pass_results,
    batch_id = excluded.batch_id, signal = NULL
"""

JOB_REWAIT = (
    """
-- (postgres_workflow_sql.JOB_REWAIT)
UPDATE skiplock_jobs_live
SET state = 'waiting', attempt = 0, run_at = :now, finished_at = NULL, result = NULL,
    progress = NULL, lease_token = NULL, lease_expires_at = NULL, cancel_requested = 0,
    parked = NULL,
    audit = """
    + sqlite_action(":now", ":who", "'retry'")
    + """
WHERE id = :id
"""
)

JOB_STATE_ERROR = """
SELECT state, CASE WHEN json_valid(errors) THEN json_extract(errors, '$[#-1].message') END
FROM skiplock_jobs WHERE id = ?
"""

OPEN_PARENTS = """
-- (postgres_workflow_sql.OPEN_PARENTS says why each condition)
SELECT DISTINCT d.parent_id FROM skiplock_deps d
WHERE d.parent_state IS NULL
  AND NOT EXISTS (SELECT 1 FROM skiplock_jobs_live j
                  WHERE j.id = d.parent_id AND j.state IN ('pending', 'running', 'waiting'))
  AND (d.on_failure <> 'wait'
       OR NOT EXISTS (SELECT 1 FROM skiplock_jobs j
                      WHERE j.id = d.parent_id AND j.state IN ('dead', 'cancelled')))
LIMIT :most
"""

STRANDED_WAITS = """
-- Waiting children at zero parents left so (the sweep's second look; SQLite's release never
-- leaves one, but a flow is written once for both).
SELECT job_id FROM skiplock_waits WHERE parents_left = 0 AND signal IS NULL
ORDER BY job_id LIMIT :most
"""

WAITS_EXPIRED = """
SELECT j.id, w.signal, coalesce(w.signal_seq, 1)
FROM skiplock_jobs_live j JOIN skiplock_waits w ON w.job_id = j.id
WHERE j.state = 'waiting' AND w.signal IS NOT NULL AND j.run_at <= :now
ORDER BY j.run_at LIMIT :most
"""

TIMEOUT_MARK = """
-- The timeout takes the mailbox entry the wait waits for (a signal stored there first wins).
INSERT OR IGNORE INTO skiplock_signals (job_id, name, seq, kind, at, taken)
VALUES (?, ?, ?, 'timeout', ?, 0)
"""

WAIT_NEXT_TIMEOUT = """
SELECT min(j.run_at) - :now
FROM skiplock_waits w JOIN skiplock_jobs_live j ON j.id = w.job_id
WHERE w.signal IS NOT NULL AND j.state = 'waiting'
"""

JOB_RESUME = """
UPDATE skiplock_jobs_live SET state = 'pending', run_at = :now
WHERE id = :id AND state = 'waiting'
RETURNING queue
"""

WAIT_PREPARE = """
INSERT INTO skiplock_waits (job_id, signal, signal_seq, created_at)
SELECT id, :name, :seq, :now FROM skiplock_jobs_live
WHERE id = :id AND lease_token = :token AND state = 'running'
ON CONFLICT (job_id) DO UPDATE SET signal = excluded.signal, signal_seq = excluded.signal_seq
RETURNING job_id
"""

PARKED_SIGNALLED = """
SELECT w.job_id FROM skiplock_waits w
WHERE w.job_id IN (SELECT value FROM json_each(:ids)) AND w.signal IS NOT NULL
  AND EXISTS (SELECT 1 FROM skiplock_signals s
              WHERE s.job_id = w.job_id AND s.name = w.signal
                AND s.seq >= coalesce(w.signal_seq, 1))
"""

PARKED_SIGNALLED_ANY = """
-- The sweep's look for parked jobs whose signal is stored all the same (PARKED_SIGNALLED
-- of postgres_workflow_sql.py says when).
SELECT w.job_id FROM skiplock_waits w JOIN skiplock_jobs_live j ON j.id = w.job_id
WHERE w.signal IS NOT NULL AND j.state = 'waiting'
  AND EXISTS (SELECT 1 FROM skiplock_signals s
              WHERE s.job_id = w.job_id AND s.name = w.signal
                AND s.seq >= coalesce(w.signal_seq, 1))
ORDER BY w.job_id LIMIT :most
"""

JOB_STATE = "SELECT state FROM skiplock_jobs WHERE id = ?"

SIGNAL_APPEND = """
-- (postgres_workflow_sql.SIGNAL_APPEND: none written past :most signals no wait took)
INSERT INTO skiplock_signals (job_id, name, seq, kind, payload, at, sender, taken)
SELECT :id, :name, coalesce(max(seq), 0) + 1, 'signal', :payload, :now, :who, 0
FROM skiplock_signals WHERE job_id = :id AND name = :name
HAVING (SELECT count(*) FROM skiplock_signals u
        WHERE u.job_id = :id AND u.kind = 'signal' AND u.taken = 0) < :most
RETURNING seq
"""

WAIT_OF = "SELECT signal, coalesce(signal_seq, 1) FROM skiplock_waits WHERE job_id = ?"

JOB_AUDIT_ADD = (
    """
-- A person's action on a live job, in its own trail (postgres_workflow_sql.JOB_AUDIT_ADD).
UPDATE skiplock_jobs_live
SET audit = """
    + sqlite_action(":now", ":who", ":what")
    + """
WHERE id = :id
"""
)

SIGNAL_GET = """
SELECT kind, payload, sender, at, taken FROM skiplock_signals
WHERE job_id = ? AND name = ? AND seq = ?
"""

SIGNAL_TAKEN = "UPDATE skiplock_signals SET taken = 1 WHERE job_id = ? AND name = ? AND seq = ?"

STEP_GET = "SELECT result FROM skiplock_steps WHERE job_id = ? AND name = ? AND seq = ?"

STEP_PUT = """
INSERT OR IGNORE INTO skiplock_steps (job_id, name, seq, result, done_at)
SELECT id, :name, :seq, :result, :now FROM skiplock_jobs_live
WHERE id = :id AND lease_token = :token AND state = 'running'
"""

PARENT_RESULTS = (
    "SELECT d.parent_id, d.parent_state, "
    + EDGE_RESULT.format(d="d")
    + """
FROM skiplock_deps d WHERE d.child_id = ? ORDER BY d.position
"""
)

_PARENT_STATE = """coalesce((SELECT j.state FROM skiplock_jobs j WHERE j.id = d.parent_id),
                d.parent_state, 'gone')"""

JOB_PARENTS = (
    """
-- (postgres_workflow_sql.py says what each of these reads)
SELECT d.parent_id, """
    + _PARENT_STATE
    + """, d.on_failure
FROM skiplock_deps d
WHERE d.child_id = ? ORDER BY d.position, d.parent_id LIMIT ?
"""
)

JOB_PARENT_COUNTS = (
    """
SELECT """
    + _PARENT_STATE
    + """ AS state, count(*)
FROM skiplock_deps d WHERE d.child_id = ? GROUP BY 1 ORDER BY 1
"""
)

JOB_PARENTS_AFTER = (
    """
SELECT d.parent_id, """
    + _PARENT_STATE
    + """, d.on_failure
FROM skiplock_deps d
WHERE d.child_id = ? AND d.parent_id > ? ORDER BY d.parent_id LIMIT ?
"""
)

JOB_CHILDREN = """
SELECT d.child_id,
       coalesce((SELECT j.state FROM skiplock_jobs j WHERE j.id = d.child_id), 'gone'),
       d.on_failure
FROM skiplock_deps d
WHERE d.parent_id = ? AND d.child_id > ? ORDER BY d.child_id LIMIT ?
"""

JOB_WAIT = "SELECT parents_left, signal, pass_results FROM skiplock_waits WHERE job_id = ?"

JOB_BATCH = """
SELECT batch_id FROM skiplock_batch_jobs WHERE job_id = :id
UNION SELECT id FROM skiplock_batches WHERE on_success = :id OR on_complete = :id
LIMIT 1
"""

BATCH_INSERT = "INSERT INTO skiplock_batches (created_at) VALUES (?) RETURNING id"

BATCH_SET_CALLBACKS = "UPDATE skiplock_batches SET on_success = ?, on_complete = ? WHERE id = ?"

BATCH_GET = (
    "SELECT closed_at IS NOT NULL, on_success, on_complete FROM skiplock_batches WHERE id = ?"
)

BATCH_CLOSE = """
UPDATE skiplock_batches SET closed_at = ? WHERE id = ? AND closed_at IS NULL
RETURNING on_success, on_complete
"""

BATCH_ABORT = """
UPDATE skiplock_batches SET closed_at = :now, aborted_at = :now
WHERE id = :id AND closed_at IS NULL
RETURNING on_success, on_complete
"""

MEMBERS_CANCEL = """
-- An aborted batch's members that never started (postgres_workflow_sql.MEMBERS_CANCEL).
UPDATE skiplock_jobs_live
SET state = 'cancelled', finished_at = :now, errors = json_insert(errors, '$[#]', json(:error))
WHERE id IN (SELECT job_id FROM skiplock_batch_jobs WHERE batch_id = :batch)
  AND state IN ('pending', 'waiting') AND attempted_at IS NULL
RETURNING id
"""

BATCH_MEMBER_INSERT = "INSERT OR IGNORE INTO skiplock_batch_jobs (batch_id, job_id) VALUES (?, ?)"

BATCH_INFO = """
SELECT b.id, b.created_at, b.closed_at, b.on_success, b.on_complete,
       (SELECT json_group_object(s.state, s.n) FROM (
            SELECT coalesce((SELECT j.state FROM skiplock_jobs j WHERE j.id = m.job_id),
                            'gone') AS state,
                   count(*) AS n
            FROM skiplock_batch_jobs m
            WHERE m.batch_id = b.id GROUP BY 1) s),
       b.aborted_at, b.pruned_members
FROM skiplock_batches b WHERE b.id = ?
"""

WAITING_LIST = """
SELECT j.id, j.task, j.queue, w.parents_left, w.signal, j.run_at, j.created_at
FROM skiplock_jobs_live j LEFT JOIN skiplock_waits w ON w.job_id = j.id
WHERE j.state = 'waiting' ORDER BY j.id LIMIT ?
"""

GRAPH_EDGES = """
SELECT parent_id, child_id FROM skiplock_deps
WHERE parent_id IN (SELECT value FROM json_each(:ids))
   OR child_id IN (SELECT value FROM json_each(:ids))
"""

GRAPH_NODES = """
SELECT id, task, state FROM skiplock_jobs WHERE id IN (SELECT value FROM json_each(:ids))
"""

ANY_OPEN_EDGE = "SELECT EXISTS (SELECT 1 FROM skiplock_deps WHERE parent_state IS NULL)"

_MEMBERS_GONE = """
    SELECT x.rowid FROM skiplock_batch_jobs x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id = x.job_id)
    ORDER BY x.rowid LIMIT :most"""
"""The batch members a prune deletes (their jobs are gone), at most :most: the same rows for
the count and the delete, in one transaction (in rowid order, so the two pick alike)."""

BATCH_MEMBERS_PRUNED = (
    """
-- Each batch adds how many of its members this prune deletes to its pruned_members (they
-- count as 'gone' while it lasts); run first in WORKFLOW_PRUNE's transaction (nothing there
-- before the members' delete changes which rows it picks).
UPDATE skiplock_batches AS b SET pruned_members = b.pruned_members + g.n
FROM (SELECT m.batch_id, count(*) AS n FROM skiplock_batch_jobs m
      WHERE m.rowid IN ("""
    + _MEMBERS_GONE
    + """)
      GROUP BY m.batch_id) AS g
WHERE b.id = g.batch_id
"""
)

WORKFLOW_PRUNE = (
    """DELETE FROM skiplock_steps WHERE rowid IN (
    SELECT x.rowid FROM skiplock_steps x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id = x.job_id) LIMIT :most)""",
    """DELETE FROM skiplock_signals WHERE rowid IN (
    SELECT x.rowid FROM skiplock_signals x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id = x.job_id) LIMIT :most)""",
    """DELETE FROM skiplock_deps WHERE rowid IN (
    SELECT x.rowid FROM skiplock_deps x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id = x.child_id) LIMIT :most)""",
    """DELETE FROM skiplock_waits WHERE job_id IN (
    SELECT x.job_id FROM skiplock_waits x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs_live j
                      WHERE j.id = x.job_id AND j.state IN ('waiting', 'running'))
    LIMIT :most)""",
    """DELETE FROM skiplock_batch_jobs WHERE rowid IN (""" + _MEMBERS_GONE + ")",
    """DELETE FROM skiplock_batches WHERE id IN (
    SELECT x.id FROM skiplock_batches x
    WHERE x.closed_at IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM skiplock_batch_jobs m WHERE m.batch_id = x.id)
      AND NOT EXISTS (SELECT 1 FROM skiplock_jobs j WHERE j.id IN (x.on_success, x.on_complete))
    LIMIT :most)""",
    """DELETE FROM skiplock_parent_results WHERE parent_id IN (
    SELECT x.parent_id FROM skiplock_parent_results x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_deps d WHERE d.parent_id = x.parent_id)
    LIMIT :most)""",
    """DELETE FROM skiplock_unreleased WHERE job_id IN (
    SELECT x.job_id FROM skiplock_unreleased x
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs j
                      WHERE j.id = x.job_id AND j.state IN ('cancelled', 'dead'))
    LIMIT :most)""",
)
"""What a workflow leaves once its jobs are gone (postgres_workflow_sql.WORKFLOW_PRUNE says
which rows), at most :most rows a table."""
