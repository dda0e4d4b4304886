"""PostgreSQL's concurrency keys: the keyed segment of the live partition and its claim.

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
"""

from __future__ import annotations

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


JOB_BUSIEST_KEYS = f"""
-- The $4 keys with the most running jobs, then the most ready (at $1, NULL: now), of queue
-- $2 and task $3 (NULL: any): each key's live jobs counted, the keyed segment's rows alone
-- (none of history, no unkeyed job).
SELECT concurrency_key AS key,
       count(*) FILTER (WHERE state = 'running') AS running,
       count(*) FILTER (WHERE state = 'pending'
                        AND run_at <= coalesce($1::timestamptz, now())) AS ready,
       count(*) FILTER (WHERE state = 'pending') AS pending,
       max(key_limit) AS key_limit
FROM {{s}}.skiplock_jobs
WHERE state IN ('pending', 'running') AND segment = {KEYED_SEGMENT}
  AND ($2::text IS NULL OR queue = $2) AND ($3::text IS NULL OR task = $3)
GROUP BY concurrency_key
ORDER BY running DESC, ready DESC, pending DESC, concurrency_key
LIMIT $4
"""

JOB_BLOCKED_KEYS = f"""
-- The $1 ordered keys a dead job holds (ordering_on_dead 'block'), oldest first: the dead
-- job and how many live jobs wait behind it (the dead partition's blocking index).
SELECT d.concurrency_key AS key, min(d.id) AS dead_job_id,
       (SELECT count(*) FROM {{s}}.skiplock_jobs l
        WHERE l.state IN ('pending', 'running') AND l.segment = {KEYED_SEGMENT}
          AND l.concurrency_key = d.concurrency_key) AS waiting
FROM {{s}}.skiplock_jobs d
WHERE d.state = 'dead' AND d.key_order = 'block'
GROUP BY d.concurrency_key
ORDER BY min(d.id)
LIMIT $1
"""

KEYED_READY = f"""SELECT 1 FROM {{s}}.skiplock_jobs j
    WHERE j.state = 'pending' AND j.segment = {KEYED_SEGMENT}
      AND j.run_at <= (SELECT t FROM now_)
      AND ($1::text[] IS NULL OR j.queue = ANY($1::text[]))
      AND j.queue NOT IN (SELECT name FROM {{s}}.skiplock_queues
                          WHERE paused OR max_running IS NOT NULL OR rate_per_s IS NOT NULL)
      AND j.task NOT IN (SELECT task FROM {{s}}.skiplock_task_pauses
                         WHERE until IS NULL OR until > (SELECT t FROM now_))
      AND (j.key_limit IS NULL
           OR (SELECT count(*) FROM {{s}}.skiplock_jobs r
               WHERE r.state = 'running' AND r.segment = {KEYED_SEGMENT}
                 AND r.concurrency_key = j.concurrency_key) < j.key_limit)
      -- an ordered key's head alone, and not while a dead job blocks it or an earlier
      -- one is parked on a signal
      AND (j.key_order IS NULL
           OR NOT EXISTS (SELECT 1 FROM {{s}}.skiplock_jobs e
                          WHERE e.state IN ('pending', 'running')
                            AND e.segment = {KEYED_SEGMENT}
                            AND e.concurrency_key = j.concurrency_key AND e.id < j.id)
              AND NOT EXISTS ({blocked("j.concurrency_key", "j.id")})
              AND NOT EXISTS ({parked_ahead("j.concurrency_key", "j.id")}))"""
"""A ready keyed job of a queue in $1 whose key has room (JOB_READY_EXISTS, at ``now_``):
the keyed claim's rule, read without its locks."""
