"""SQLite's priority aging: a queue's ``aging_s`` and the claim that honours it.

The same rule and the same bounded walk as PostgreSQL's (postgres_aging_sql.py, where the
reasoning is): effective priority ``priority + floor(wait / aging_s)``, ``wait = now -
run_at``, ties by ``run_at`` then ``id``; the candidates are the first ``limit`` ready jobs of
each of the queue's ``AGING_LEVELS`` highest and as many lowest pending priorities, each read
from the per-queue pending index in its order. SQLite has no LATERAL: a correlated ``IN``
subquery per priority does the same probe. ``wait`` is never negative (only due jobs are
ranked), so the integer cast is the floor.
"""

from __future__ import annotations

_PRIORITIES = """{name}(priority, n) AS (
    SELECT {pick}(priority), 1 FROM skiplock_jobs_live
    WHERE queue = :q0 AND (concurrency_key IS NOT NULL) = 0 AND state = 'pending'
    UNION ALL
    SELECT (SELECT {pick}(j.priority) FROM skiplock_jobs_live j
            WHERE j.queue = :q0 AND (j.concurrency_key IS NOT NULL) = 0 AND j.state = 'pending'
              AND j.priority {beyond} {name}.priority), {name}.n + 1
    FROM {name} WHERE {name}.priority IS NOT NULL AND {name}.n < :levels
)"""
"""A loose scan of queue :q0's distinct pending priorities from one end (one probe each)."""


def aged_claim(claim_set: str, claim_returning: str) -> str:
    """JOB_GET_AVAILABLE_AGED: the claims' shared update ``claim_set`` of the rows picked,
    returning ``claim_returning``."""
    hi = _PRIORITIES.format(name="hi", pick="max", beyond="<")
    lo = _PRIORITIES.format(name="lo", pick="min", beyond=">")
    return f"""
-- Claim up to :limit ready jobs of queue :q0 by effective priority, priority +
-- floor(wait / :aging), wait = :now - run_at, then run_at, id (sqlite_aging_sql.py); the
-- write transaction serialises claimers.
WITH RECURSIVE {hi},
{lo},
levels(priority) AS (
    SELECT priority FROM hi WHERE priority IS NOT NULL
    UNION SELECT priority FROM lo WHERE priority IS NOT NULL
),
ranked AS (
    SELECT j.id, j.run_at,
           j.priority + CAST((:now - j.run_at) / :aging AS INTEGER) AS effective
    FROM levels l JOIN skiplock_jobs_live j ON j.id IN (
        -- one priority's oldest ready jobs: its slice of the per-queue pending index
        SELECT id FROM skiplock_jobs_live
        WHERE queue = :q0 AND (concurrency_key IS NOT NULL) = 0 AND state = 'pending'
          AND priority = l.priority AND run_at <= :now
          AND task NOT IN (SELECT task FROM skiplock_task_pauses
                           WHERE until IS NULL OR until > :now)
        ORDER BY run_at, id
        LIMIT :limit)
)
{claim_set}WHERE id IN (SELECT id FROM ranked ORDER BY effective DESC, run_at, id LIMIT :limit)
{claim_returning}"""
