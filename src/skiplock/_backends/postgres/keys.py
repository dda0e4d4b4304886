"""PostgreSQL's concurrency keys: the busiest and the blocked keys a person reads, and the
keyed claim's walk.

PostgreSQL's concurrency keys: the keyed segment of the live partition and its claim.

A job enqueued with ``concurrency_key`` may run only while fewer than its ``key_limit`` jobs
with that key run anywhere (docs/design.md, "Concurrency keys"). Three parts make that hold:

- **Its own segment.** Keyed jobs are written to segment ``KEYED_SEGMENT`` of the live
  partition (``skiplock_jobs_live_keyed``), never rotated, and every other segment holds
  unkeyed jobs only (a check constraint on the live partition). The ordinary claims name the
  other segments, so the planner leaves the keyed one out: a backlog of 100,000 keyed jobs
  costs an ordinary claim nothing. Every other statement (counts, stats, a person's actions)
  reads the keyed segment like any other.
- **A walk over keys.** The keyed claim visits the keys with pending jobs in (queue, key)
  order from where the previous claim stopped (a loose scan of the segment's walk index: one
  probe a key, however many jobs each has), takes at most ``limit - running`` of each, and
  orders what it found by priority, then by the key's turn, then by age. A hot key with
  100,000 ready jobs takes one turn like a key with one.
- **A lock per key, then a fresh count.** ``skiplock_key_running`` takes a transaction-level
  advisory try-lock on the key (another claimer holding it: the key is skipped, never waited
  for) and only then counts the key's running jobs, in a statement of its own: a VOLATILE
  function's statements read a snapshot taken when each begins, so the count sees every
  claim committed before the lock was free. Counting in the claim's own snapshot would let
  two claimers both see a free slot. The count is of rows, not a counter: a job that stops
  running by any path (completion, a reclaimed lease, a person's action, a worker's crash)
  frees its slot with its row.

Turns: PostgreSQL's keyed claim since migration 22: turns kept in the database, a parked job
holding its ordered key, and a walk that costs a few microseconds a key.

Why (docs/design.md, "Concurrency keys", "Turns in the database"): before, a key's turn was
its rank among the jobs one claim read, so ``key_weight`` and ``fair=False`` acted only
inside one claim's batch, and once slots freed one at a time (``--concurrency 1``, any steady
state) every key took one job a turn. Now each key has a **pass** in ``skiplock_key_turns``,
advanced at every claim by ``TURN_UNITS / key_weight`` a job, so every claim of every worker
sees how far each key got. The rule (``common.py`` holds the constants, SQLite's
``sqlite_keys.PICK`` the same rule):

- A visited key's pass is lifted to at least one turn below the highest pass among the keys
  the claim visits (a key new to the table, or back after it had no live job, or one whose
  pass fell behind while it was passed over, starts its turn at once, and takes no more
  than one turn ahead of the others). A key's row goes with its last live job (migration 25,
  ``MIGRATION_TURNS_END``), so a key back from idle is a new key: it keeps no pass from
  before, neither the turns it was behind nor those it was ahead.
- Its ready job of rank r (1 first, claim order within the key) is in turn
  ``(pass + (r - 1) * TURN_UNITS / weight) / TURN_UNITS``; a ``fair=False`` key's jobs are all
  in the current turn (the lowest turn a weighted key the claim visits is in), whatever it
  took before.
- Jobs are taken by priority, then turn, then age (run_at, id), within each key's room.
- The pass of each key the claim took from advances by what it took.
- The walk starts next at the first visited key that still has work in the turn this claim
  started in (so a key of weight 3 keeps its place until its three jobs are taken); once
  every visited key is past that turn, after the last visited key (the keys beyond get their
  turn), or from the first key when the walk went round them all.

The claim is also cheaper a key (docs/design.md, "Plans that hold whatever the statistics
say"; 20,000 one-job keys drained in 3.3 s where they took 17): it counts the running jobs of a
key only when the key has a limit (a key without one is only locked, inline); it locks the
chosen rows by primary key whatever the statistics say (``state <> 'running'``, which no
partial index's predicate matches: a plan made without statistics walked a whole partial
index for 10 ids, 11 ms a claim); and when it serves every queue it reads the walk index's
next entries in one scan, which for keys of a job or two is the whole walk and every key's
candidates (no probe a key), else it steps over the keys' backlogs with a recursive loose
scan, a probe a key whose entry carries the key's limit, weight and order.

The walk (``keyed_claim``, over the claims' update ``_CLAIM_UPDATE``) is the statement inside
``skiplock_keyed_claim`` as the migrations made it (its text is frozen in
``migrations/0022.sql``); it is built here only for the plan tests that EXPLAIN it
(tests/backends/test_query_plan.py). The statements the backend runs are in
``queries/keys.sql`` and ``queries/claim.sql``.
"""

from __future__ import annotations

from ..._job import BlockedKey, KeyLoad
from ..claim_rules import TURN_UNITS
from ..job_rows import blocked_key, key_load
from ..params import JobBusiestKeysParams
from .connection import Connection
from .errors import wrapped as _wrapped

KEYED_SEGMENT = 4
"""The live segment keyed jobs are written to (0-2 are the ring, 3 the long segment)."""

KEYED_TABLE = "skiplock_jobs_live_keyed"


def blocked(key: str, head: str) -> str:
    """A dead job of ordered key ``key`` before its head ``head`` that blocks it (until a
    person retries or discards it): a probe of the dead partition's blocking index."""
    return f"""SELECT 1 FROM {{s}}.skiplock_jobs d
                  WHERE d.state = 'dead' AND d.key_order = 'block'
                    AND d.concurrency_key = {key} AND d.id < {head}"""


def parked_ahead(key: str, head: str) -> str:
    """A job of ordered key ``key`` parked on a signal (``wait_for``) with an id below
    ``head``: it keeps its key's turn until it finishes. One probe of the waiting partition's
    ordered index, then of the parked job's wait row (a job waiting for its parents, which
    never ran, holds nothing: its parents may be later jobs of the same key)."""
    return f"""SELECT 1 FROM {{s}}.skiplock_jobs p JOIN {{s}}.skiplock_waits pw ON pw.job_id = p.id
                  WHERE p.state = 'waiting' AND p.key_order IS NOT NULL
                    AND p.concurrency_key = {key} AND p.id < {head}
                    AND pw.signal IS NOT NULL"""


_S = str(TURN_UNITS)

_PAUSED_OR_LIMITED = """SELECT name FROM {s}.skiplock_queues
                      WHERE paused OR (NOT $8 AND (max_running IS NOT NULL
                                                   OR rate_per_s IS NOT NULL))"""

_PAUSED_TASKS = """SELECT task FROM {s}.skiplock_task_pauses
                           WHERE until IS NULL OR until > (SELECT t FROM now_)"""

_FIRST = """j.id, j.priority, j.run_at, j.task, j.key_limit, j.key_weight, j.key_order"""
"""A pending job's columns the claim reads of a key's first one (its limit, weight, order)."""

_FIRST_OF = "id, priority, run_at, task, key_limit, key_weight, key_order"


def _walk_probe(after: str) -> str:
    """The first pending job (claim order) of the first (queue, key) pair after ``after``: one
    probe of the walk index (the keyed segment's own table: through the partitioned one a row
    comparison is no index condition), and its row."""
    return f"""SELECT j.queue AS q, j.concurrency_key AS k, {_FIRST} FROM {{s}}.{KEYED_TABLE} j
            WHERE j.state = 'pending' AND (j.queue, j.concurrency_key) > {after}
            ORDER BY j.queue, j.concurrency_key, j.priority DESC, j.run_at, j.id LIMIT 1"""


def keyed_claim(claim_update: str) -> str:
    """The keyed claim since migration 22; ``claim_update`` is the ordinary claims' update of
    the ids in ``c`` (``_CLAIM_UPDATE`` below)."""
    where = (
        "WHERE j.id = ANY(ARRAY(SELECT id FROM c)) AND j.state IN ('pending', 'running')\n"
        f"  AND j.segment <> {KEYED_SEGMENT}  -- the keyed claim's: = (its own segment)"
    )
    assert where in claim_update and "UPDATE {s}.skiplock_jobs j" in claim_update
    update = claim_update.replace(where, "WHERE j.id = ANY(ARRAY(SELECT id FROM c))").replace(
        "UPDATE {s}.skiplock_jobs j", "UPDATE {s}." + KEYED_TABLE + " j"
    )
    first_probe = _walk_probe("(coalesce($9, ''), coalesce($10, ''))")
    return (
        f"""
-- Claim up to $2 ready keyed jobs of the queues in $1 (NULL: any) for worker $3 under token
-- $4 (leases as the ordinary claim: $5 default, $6 margin; $7 now), visiting at most $11
-- (queue, key) pairs after the cursor ($9, $10; NULL: from the first). $8: a limited queue's
-- own claim, under its settings row's lock (otherwise limited queues are left to it). Rows:
-- each job claimed with its key, in the claim's order (place), and in every row where the
-- next walk starts (next_queue, next_key; NULL: from the first); one row of NULLs but those
-- when nothing was claimed.
WITH RECURSIVE now_ AS (SELECT coalesce($7::timestamptz, now()) AS t),
scan AS MATERIALIZED (
    -- every queue served: the walk index's next 2 x $11 entries after the cursor, in its
    -- order (one descent, then leaf by leaf: many keys of a job or two, a key an entry),
    -- each with its key's place and its own within the key
    SELECT e.*, dense_rank() OVER (ORDER BY e.q, e.k) AS pos,
           row_number() OVER (PARTITION BY e.q, e.k
                              ORDER BY e.priority DESC, e.run_at, e.id) AS nth
    FROM (
        SELECT j.queue AS q, j.concurrency_key AS k, {_FIRST} FROM {{s}}.{KEYED_TABLE} j
        WHERE $1 IS NULL AND j.state = 'pending'
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
    SELECT n.q, n.k, n.lap, 1 AS pos, {_FIRST_OF} FROM (
        (SELECT x.*, 0 AS lap FROM ({first_probe}) x)
        UNION ALL
        (SELECT x.*, 1 FROM ({_walk_probe("('', '')")}) x WHERE $10 IS NOT NULL)
        LIMIT 1
    ) n
    WHERE $1 IS NULL AND NOT (SELECT yes FROM fast) AND (n.lap = 0 OR (n.q, n.k) <= ($9, $10))
    UNION ALL
    SELECT n.q, n.k, n.lap, r.pos + 1, {", ".join("n." + c for c in _FIRST_OF.split(", "))}
    FROM round r CROSS JOIN LATERAL (
        (SELECT x.*, r.lap FROM ({_walk_probe("(r.q, r.k)")}) x)
        UNION ALL
        (SELECT x.*, 1 FROM ({_walk_probe("('', '')")}) x WHERE r.lap = 0 AND $10 IS NOT NULL)
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
    FROM {{s}}.skiplock_key_walk($9::text, $10::text, $1::text[], $11) w
    CROSS JOIN LATERAL (
        SELECT j.key_limit, j.key_weight, j.key_order FROM {{s}}.{KEYED_TABLE} j
        WHERE j.state = 'pending' AND j.queue = w.q AND j.concurrency_key = w.k
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
                THEN CASE WHEN pg_try_advisory_xact_lock(hashtext('skiplock_key:{{s}}'),
                                                         hashtext(w.k)) THEN 0 END
                ELSE {{s}}.skiplock_key_running(w.k) END AS running,
           (SELECT t.pass FROM {{s}}.skiplock_key_turns t WHERE t.concurrency_key = w.k) AS pass
    FROM walk w
    -- paused queues never; limited queues only through their own locked claim ($8)
    WHERE w.q NOT IN ({_PAUSED_OR_LIMITED})
),
lifted AS MATERIALIZED (
    -- each key's pass, at least one turn below the highest the claim visits
    SELECT k.q, k.k, k.pos, k.lim, k.ordered, k.running, k.entries,
           greatest(coalesce(k.pass, 0), m.low) AS pass,
           CASE WHEN k.wt = 0 THEN 0 ELSE {_S} / k.wt END AS stride
    FROM keys k,
         (SELECT greatest(0, (coalesce(max(pass), 0) / {_S} - 1) * {_S}) AS low FROM keys) m
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
      AND s.run_at <= (SELECT t FROM now_) AND s.task NOT IN ({_PAUSED_TASKS})
    UNION ALL
    SELECT c.id, c.priority, c.run_at, k.q, k.k, k.pos, k.lim, k.running, k.pass, k.stride
    FROM lifted k CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM {{s}}.skiplock_jobs
        WHERE state = 'pending' AND segment = {KEYED_SEGMENT}
          AND queue = k.q AND concurrency_key = k.k AND run_at <= (SELECT t FROM now_)
          AND task NOT IN ({_PAUSED_TASKS})
        ORDER BY priority DESC, run_at, id
        LIMIT $2
    ) c
    WHERE k.entries IS NULL AND k.ordered IS NULL
    UNION ALL
    SELECT h.id, h.priority, h.run_at, k.q, k.k, k.pos, k.lim, k.running, k.pass, k.stride
    FROM lifted k CROSS JOIN LATERAL (
        SELECT id, priority, run_at, state, queue, task FROM {{s}}.skiplock_jobs
        WHERE state IN ('pending', 'running') AND segment = {KEYED_SEGMENT}
          AND concurrency_key = k.k
        ORDER BY id LIMIT 1
    ) h
    WHERE k.ordered IS NOT NULL
      AND h.state = 'pending' AND h.queue = k.q AND h.run_at <= (SELECT t FROM now_)
      AND h.task NOT IN ({_PAUSED_TASKS})
      AND NOT EXISTS ({blocked("k.k", "h.id")})
      AND NOT EXISTS ({parked_ahead("k.k", "h.id")})
),
cand AS MATERIALIZED (
    SELECT j.*, row_number() OVER w AS rank, count(*) OVER (PARTITION BY j.k) AS ready
    FROM jobs j
    WINDOW w AS (PARTITION BY j.k ORDER BY j.priority DESC, j.run_at, j.id)
),
roomy AS MATERIALIZED (
    -- within each key's room, each job's turn (a fair=False key's: the current one)
    SELECT c.*, CASE WHEN c.stride = 0 THEN now_turn.t
                     ELSE (c.pass + (c.rank - 1) * c.stride) / {_S} END AS turn
    FROM cand c, (SELECT coalesce(min(pass / {_S}), 0) AS t FROM cand
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
    SELECT j.id FROM {{s}}.{KEYED_TABLE} j
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND j.state <> 'running'
    FOR UPDATE SKIP LOCKED
),
claimed AS (
"""
        + update.rstrip()
        + f""", j.concurrency_key AS key
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
    INSERT INTO {{s}}.skiplock_key_turns AS t (concurrency_key, pass, step)
    SELECT DISTINCT ON (k) k, pass, n * stride FROM took
    WHERE n > 0 AND stride > 0 ORDER BY k, pass DESC
    ON CONFLICT (concurrency_key) DO UPDATE
    SET pass = greatest(t.pass + excluded.step, excluded.pass), step = excluded.step
),
started AS (
    -- the first visited key (walk order) still with work in the turn this claim started in:
    -- a job it read and did not take, or as many as it read ($2, so maybe more), and room
    SELECT min(o.pos) AS pos FROM took o
    WHERE o.stride > 0 AND o.pass / {_S} = (SELECT min(turn) FROM roomy WHERE stride > 0)
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
ORDER BY p.place
"""
    )


_CLAIM_UPDATE = (
    """UPDATE {s}.skiplock_jobs j
SET state = 'running', attempt = j.attempt + 1, attempted_at = (SELECT t FROM now_),
    ready_at = greatest(j.run_at, j.created_at),
    started_at = NULL, locked_by = $3, lease_token = $4,
    lease_expires_at = (SELECT t FROM now_)
                       + make_interval(secs => coalesce(j.lease_s, coalesce(j.timeout, $5) + $6))
-- id = ANY(ARRAY(...)) keeps the update on the primary key: joining the CTE instead lets the
-- planner hash a scan of the whole table once batches grow past ~50 rows.
-- state IN (...): the live partition alone, and no partial index's predicate (with
-- state = 'pending' the planner may walk a whole pending index for the ids)
WHERE j.id = ANY(ARRAY(SELECT id FROM c)) AND j.state IN ('pending', 'running')
  AND j.segment <> """
    + str(KEYED_SEGMENT)
    + """  -- the keyed claim's: = (its own segment)
RETURNING j.id, j.task, j.queue, j.args::text AS args, j.kwargs::text AS kwargs, j.priority,
          j.attempt, j.max_attempts, j.timeout, j.lease_token, j.created_at, j.lease_expires_at,
          coalesce(j.lease_s, coalesce(j.timeout, $5) + $6) AS lease_s, j.correlation_id,
          j.trace_context, coalesce(j.payload_version, 1) AS payload_version, j.segment
"""
)
"""What both claims do with the ids their CTE ``c`` picked at the time in ``now_``: running,
attempt + 1, leased to $3 under token $4 for the job's lease, or its timeout (else $5) + $6.
(The keyed claim's function, migrations 13 and 14, holds this text as it was then.)"""


class Keys(Connection):
    """Concurrency keys: the busiest and the blocked."""

    async def job_busiest_keys(self, params: JobBusiestKeysParams) -> list[KeyLoad]:
        limit, queue, task = params.limit, params.queue, params.task
        with _wrapped("job_busiest_keys"):
            args = (self._now(), queue, task, limit)
            rows = await self.pool.fetch(self._sql.JOB_BUSIEST_KEYS, *args)
        return [key_load(tuple(r)) for r in rows]

    async def job_blocked_keys(self, limit: int) -> list[BlockedKey]:
        with _wrapped("job_blocked_keys"):
            rows = await self.pool.fetch(self._sql.JOB_BLOCKED_KEYS, limit)
        return [blocked_key(tuple(r)) for r in rows]
