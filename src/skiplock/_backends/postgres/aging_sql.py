"""PostgreSQL's priority aging: a queue's ``aging_s`` and the claim that honours it.

A ready job's *effective priority* is ``priority + floor(wait / aging_s)``, ``wait = now -
run_at`` (how long it has been due), ties by ``run_at`` then ``id`` (docs/design.md, "Priority
aging"). The order changes with the clock, so no index can hold it; what keeps the claim
bounded is that jobs of one priority age alike: within a priority, the effective order is the
index order (oldest first). So the best ``limit`` jobs of the queue are among the first
``limit`` ready jobs of each of its priorities, and the claim reads exactly those: a loose
index scan of the per-queue pending index finds the queue's distinct priorities (one probe
each), a probe per priority reads its first ``limit`` ready jobs in index order, and only
those few rows are ranked. No sort of the backlog, no scan of it, whatever its size.

A queue may hold jobs of very many priorities (any int32); the walk visits at most
``common.AGING_LEVELS`` of them from the top and as many from the bottom, so the jobs aging is for
(the lowest) are always seen. Only with more than twice that many distinct priorities ready at
once is a priority in the middle left out of a claim until the ends drain to it.

The claim runs under the queue's settings-row lock (``flows.limited_claim``), so its claimers
take turns and the ranking they read is the one they take.
"""

from __future__ import annotations


def _levels(name: str, pick: str, beyond: str, unkeyed: str) -> str:
    """The CTE ``name``: up to $9 of queue $1's distinct pending priorities from one end (the
    highest with ``max``/``<``, the lowest with ``min``/``>``), one index probe each."""
    return f"""{name}(priority, n) AS (
    SELECT {pick}(priority), 1 FROM {{s}}.skiplock_jobs
    WHERE queue = $1 AND state = 'pending' AND {unkeyed}
    UNION ALL
    SELECT (SELECT {pick}(j.priority) FROM {{s}}.skiplock_jobs j
            WHERE j.queue = $1 AND j.state = 'pending' AND j.{unkeyed}
              AND j.priority {beyond} {name}.priority), {name}.n + 1
    FROM {name} WHERE {name}.priority IS NOT NULL AND {name}.n < $9
)"""


def aged_claim(claim_update: str, keyed_segment: int) -> str:
    """JOB_GET_AVAILABLE_AGED around the claims' shared update ``claim_update`` (which reads
    the CTE ``c`` of ids and ``now_``)."""
    unkeyed = f"segment <> {keyed_segment}"  # keyed jobs: their own claim
    return (
        """
-- Claim up to $2 ready jobs of queue $1 by effective priority, priority + floor(wait / $8),
-- wait = now - run_at, then run_at, id; for worker $3 under token $4, leased as the other
-- claims ($5, $6; $7 now). Candidates: the first $2 ready jobs of each of the queue's $9
-- highest and $9 lowest pending priorities (postgres_aging_sql.py).
WITH RECURSIVE now_ AS (SELECT coalesce($7::timestamptz, now()) AS t),
"""
        + _levels("hi", "max", "<", unkeyed)
        + ",\n"
        + _levels("lo", "min", ">", unkeyed)
        + """,
levels AS (
    SELECT priority FROM hi WHERE priority IS NOT NULL
    UNION SELECT priority FROM lo WHERE priority IS NOT NULL
),
ranked AS (
    SELECT p.id, p.run_at,
           p.priority + floor(extract(epoch FROM (SELECT t FROM now_) - p.run_at)::float8
                              / $8::float8) AS effective
    FROM levels l CROSS JOIN LATERAL (
        -- one priority's oldest ready jobs: its slice of the per-queue pending index
        SELECT id, priority, run_at FROM {s}.skiplock_jobs
        WHERE queue = $1 AND state = 'pending' AND priority = l.priority
          AND run_at <= (SELECT t FROM now_) AND """
        + unkeyed
        + """
          AND task NOT IN (SELECT task FROM {s}.skiplock_task_pauses
                           WHERE until IS NULL OR until > (SELECT t FROM now_))
        ORDER BY run_at, id
        LIMIT $2
    ) AS p
),
c AS MATERIALIZED (
    -- the best $2, locked; SKIP LOCKED passes over a row another session holds this instant
    -- (a rotation moving it): the queue's own claimers wait on its settings row instead
    SELECT id FROM {s}.skiplock_jobs
    WHERE id = ANY(ARRAY(SELECT id FROM ranked ORDER BY effective DESC, run_at, id LIMIT $2))
      -- (state IN: the live partition alone, no partial index; lease_token IS NULL: still
      -- pending when locked, re-checked on a row changed since the statement's snapshot)
      AND state IN ('pending', 'running') AND lease_token IS NULL AND """
        + unkeyed
        + """
    FOR UPDATE SKIP LOCKED
)
"""
        + claim_update
    )
