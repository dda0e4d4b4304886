"""SQLite's keyed claim: jobs with a ``concurrency_key``, each key within its ``key_limit``.

The rule is PostgreSQL's (postgres_keys_sql.py, docs/design.md "Concurrency keys"): visit the
(queue, key) pairs with pending jobs from where the previous claim stopped, one index probe
each; take at most ``limit - running`` of each key's ready jobs; order them by priority, then
the key's turn, then age. SQLite holds the file's one write lock for the whole claim (``BEGIN
IMMEDIATE``), so no lock per key is needed: nothing else can claim, or count, meanwhile. The
walk runs here step by step (SQLite has no LATERAL, and each probe is microseconds in this
process); the pick and the update are two statements in the same transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from .common import TURN, KeyCursors, keys_to_visit, next_cursor

NEXT_PAIR = """
-- The first (queue, key) pair with a pending keyed job after (:queue, :key), any queue.
SELECT queue, concurrency_key FROM skiplock_jobs_live
WHERE state = 'pending' AND concurrency_key IS NOT NULL
  AND (queue, concurrency_key) > (:queue, :key)
ORDER BY queue, concurrency_key LIMIT 1
"""

NEXT_KEY_IN_QUEUE = """
-- The first key with a pending job in :queue after :key.
SELECT min(concurrency_key) FROM skiplock_jobs_live
WHERE state = 'pending' AND concurrency_key IS NOT NULL AND queue = :queue
  AND concurrency_key > :key
"""

_BLOCKED = """SELECT 1 FROM skiplock_jobs_live d
        WHERE d.state = 'dead' AND d.key_order = 'block' AND d.concurrency_key = {key}
          AND d.id < {head}"""
"""A dead job of ordered key ``key`` before its head that holds the key (until a person
retries or discards it)."""

PICK = (
    """
-- Of the visited pairs (:pairs, JSON [[queue, key, place], ...]), the jobs to claim: each
-- key's ready jobs within its room (its limit, which its first ready job carries, less its
-- running jobs), by priority, then the key's turn (its next key_weight jobs; 0: all of them),
-- then the walk's place; an ordered key's head alone (its
-- live job of the lowest id) if it is pending, due and not behind a dead job that blocks the
-- key. :limited: a limited queue's own claim (otherwise limited queues are left to it).
WITH keys AS (
    SELECT json_extract(value, '$[0]') AS q, json_extract(value, '$[1]') AS k,
           json_extract(value, '$[2]') AS pos
    FROM json_each(:pairs)
), counted AS (
    SELECT q, k, pos,
           (SELECT count(*) FROM skiplock_jobs_live r
            WHERE r.state = 'running' AND r.concurrency_key = keys.k) AS running,
           (SELECT j.key_order FROM skiplock_jobs_live j
            WHERE j.state = 'pending' AND j.concurrency_key IS NOT NULL
              AND j.queue = keys.q AND j.concurrency_key = keys.k
            ORDER BY j.priority DESC, j.run_at, j.id LIMIT 1) AS ordered
    FROM keys
    WHERE q NOT IN (SELECT name FROM skiplock_queues
                    WHERE paused OR (NOT :limited AND (max_running IS NOT NULL
                                                      OR rate_per_s IS NOT NULL)))
), picked AS (
    SELECT j.id, j.priority, j.run_at, j.key_limit, j.key_weight, c.q, c.k, c.pos, c.running
    FROM counted c JOIN skiplock_jobs_live j ON c.ordered IS NULL AND j.id IN (
        SELECT id FROM skiplock_jobs_live
        WHERE state = 'pending' AND concurrency_key IS NOT NULL
          AND queue = c.q AND concurrency_key = c.k AND run_at <= :now
          AND task NOT IN (SELECT task FROM skiplock_task_pauses
                           WHERE until IS NULL OR until > :now)
        ORDER BY priority DESC, run_at, id
        LIMIT :limit)
    UNION ALL
    SELECT h.id, h.priority, h.run_at, h.key_limit, h.key_weight, c.q, c.k, c.pos, c.running
    FROM counted c JOIN skiplock_jobs_live h ON c.ordered IS NOT NULL AND h.id = (
        SELECT id FROM skiplock_jobs_live
        WHERE state IN ('pending', 'running') AND concurrency_key IS NOT NULL
          AND concurrency_key = c.k
        ORDER BY id LIMIT 1)
    WHERE h.state = 'pending' AND h.queue = c.q AND h.run_at <= :now
      AND h.task NOT IN (SELECT task FROM skiplock_task_pauses
                         WHERE until IS NULL OR until > :now)
      AND NOT EXISTS ("""
    + _BLOCKED.format(key="c.k", head="h.id")
    + """)
), cand AS (
    SELECT id, q, k, priority, pos, running,
           row_number() OVER w AS rank, first_value(key_limit) OVER w AS lim,
           first_value(key_weight) OVER w AS wt
    FROM picked
    WINDOW w AS (PARTITION BY k ORDER BY priority DESC, run_at, id)
)
SELECT id, q, k, pos FROM cand WHERE lim IS NULL OR rank <= lim - running
ORDER BY priority DESC, """
    + TURN
    + """, pos, rank
LIMIT :limit
"""
)


def _next_pair(
    conn: sqlite3.Connection, queues: Sequence[str] | None, after: tuple[str, str]
) -> tuple[str, str] | None:
    """The walk's next pair after ``after``: one probe, or one a served queue (so another
    queue's keys are never read)."""
    if queues is None:
        row = conn.execute(NEXT_PAIR, {"queue": after[0], "key": after[1]}).fetchone()
        return None if row is None else (str(row[0]), str(row[1]))
    for queue in sorted(q for q in queues if q >= after[0]):
        since = after[1] if queue == after[0] else ""
        key = conn.execute(NEXT_KEY_IN_QUEUE, {"queue": queue, "key": since}).fetchone()[0]
        if key is not None:
            return queue, str(key)
    return None


def pick(
    conn: sqlite3.Connection,
    queues: Sequence[str] | None,
    *,
    limit: int,
    now: float,
    limited: bool,
    cursors: KeyCursors,
) -> list[int]:
    """The ids of the keyed jobs to claim now (at most ``limit``), inside the caller's write
    transaction; records where the next walk of these queues starts."""
    where = (None if queues is None else tuple(queues), limited)
    cursor = cursors.get(where)
    after = cursor or ("", "")
    visit = keys_to_visit(limit)
    pairs: list[tuple[str, str, int]] = []
    lap = 0
    while len(pairs) < visit:
        found = _next_pair(conn, queues, after)
        if found is None and lap == 0 and cursor is not None:
            lap, found = 1, _next_pair(conn, queues, ("", ""))  # round again from the first
        if found is None or (lap == 1 and cursor is not None and found > cursor):
            break  # every pair visited once
        after = found
        pairs.append((*found, len(pairs) + 1))
    walked: tuple[Any, Any] = after if len(pairs) == visit else (None, None)
    rows: list[Any] = []
    if pairs:
        args = {"pairs": json.dumps(pairs), "now": now, "limit": limit, "limited": limited}
        rows = conn.execute(PICK, args).fetchall()
    cursors[where] = next_cursor([(r[1], r[2], r[3]) for r in rows], walked, limit)
    return [int(r[0]) for r in rows]
