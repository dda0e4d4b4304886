"""SQLite's keyed claim: jobs with a ``concurrency_key``, each key within its ``key_limit``,
keys taking their turns.

The rule is PostgreSQL's (postgres_key_turns_sql.py, docs/design.md "Concurrency keys"):
visit the (queue, key) pairs with pending jobs from where the previous claim stopped, one
index probe each; take at most ``limit - running`` of each key's ready jobs; order them by
priority, then the turn (each key's pass in ``skiplock_key_turns`` plus its rank's share),
then age; advance the pass of each key taken from; start the next walk at the first visited
key still with work in the turn this claim started in. SQLite holds the file's one write lock
for the whole claim (``BEGIN IMMEDIATE``), so no lock per key is needed: nothing else can
claim, count, or move a pass meanwhile. The walk runs here step by step (SQLite has no
LATERAL, and each probe is microseconds in this process); the pick, the passes and the update
are statements in the same transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import NamedTuple

from .common import KEY_TURNS_SLICE, TURN_UNITS, KeyCursors, keys_to_visit

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

PARKED_AHEAD = """SELECT 1 FROM skiplock_jobs_live p JOIN skiplock_waits pw ON pw.job_id = p.id
        WHERE p.state = 'waiting' AND p.key_order IS NOT NULL AND p.concurrency_key = {key}
          AND p.id < {head} AND pw.signal IS NOT NULL"""
"""A job of ordered key ``key`` parked on a signal with an id below ``head``: it keeps its
key's turn until it finishes (a job waiting for its parents, which never ran, holds nothing)."""

_S = str(TURN_UNITS)

PICK = (
    """
-- Of the visited pairs (:pairs, JSON [[queue, key, place], ...]), each key's ready jobs
-- within its room (its limit, as its first pending job carries it, less its running jobs),
-- each with its turn (its key's pass, lifted to at least one turn below the highest of the
-- visited keys, plus its rank's share: TURN_UNITS / key_weight a job; a fair=False key's
-- jobs in the current turn), and whether the claim takes it: by priority, then turn, then
-- age, :limit of them. An ordered key's candidate is its head alone (its live job of the
-- lowest id) if it is pending, due, and behind no dead job that blocks the key and no job
-- parked on a signal. :limited: a limited queue's own claim (otherwise limited queues are
-- left to it). The rule is PostgreSQL's (postgres_key_turns_sql.py).
WITH keys AS (
    SELECT json_extract(value, '$[0]') AS q, json_extract(value, '$[1]') AS k,
           json_extract(value, '$[2]') AS pos
    FROM json_each(:pairs)
), visited AS (
    SELECT keys.q, keys.k, keys.pos, f.key_limit AS lim, coalesce(f.key_weight, 1) AS wt,
           f.key_order AS ordered,
           CASE WHEN f.key_limit IS NULL THEN 0
                ELSE (SELECT count(*) FROM skiplock_jobs_live r
                      WHERE r.state = 'running' AND r.concurrency_key = keys.k) END AS running,
           (SELECT t.pass FROM skiplock_key_turns t WHERE t.concurrency_key = keys.k) AS pass
    FROM keys JOIN skiplock_jobs_live f ON f.id = (
        SELECT j.id FROM skiplock_jobs_live j
        WHERE j.state = 'pending' AND j.concurrency_key IS NOT NULL
          AND j.queue = keys.q AND j.concurrency_key = keys.k
        ORDER BY j.priority DESC, j.run_at, j.id LIMIT 1)
    WHERE keys.q NOT IN (SELECT name FROM skiplock_queues
                         WHERE paused OR (NOT :limited AND (max_running IS NOT NULL
                                                           OR rate_per_s IS NOT NULL)))
), lifted AS (
    SELECT v.q, v.k, v.pos, v.lim, v.ordered, v.running,
           max(coalesce(v.pass, 0), m.low) AS pass,
           CASE WHEN v.wt = 0 THEN 0 ELSE """
    + _S
    + """ / v.wt END AS stride
    FROM visited v,
         (SELECT max(0, (coalesce(max(pass), 0) / """
    + _S
    + """ - 1) * """
    + _S
    + """) AS low FROM visited) m
), picked AS (
    SELECT j.id, j.priority, j.run_at, c.q, c.k, c.pos, c.lim, c.running, c.pass, c.stride
    FROM lifted c JOIN skiplock_jobs_live j ON c.ordered IS NULL AND j.id IN (
        SELECT id FROM skiplock_jobs_live
        WHERE state = 'pending' AND concurrency_key IS NOT NULL
          AND queue = c.q AND concurrency_key = c.k AND run_at <= :now
          AND task NOT IN (SELECT task FROM skiplock_task_pauses
                           WHERE until IS NULL OR until > :now)
        ORDER BY priority DESC, run_at, id
        LIMIT :limit)
    UNION ALL
    SELECT h.id, h.priority, h.run_at, c.q, c.k, c.pos, c.lim, c.running, c.pass, c.stride
    FROM lifted c JOIN skiplock_jobs_live h ON c.ordered IS NOT NULL AND h.id = (
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
      AND NOT EXISTS ("""
    + PARKED_AHEAD.format(key="c.k", head="h.id")
    + """)
), cand AS (
    SELECT *, row_number() OVER w AS rank, count(*) OVER (PARTITION BY k) AS ready
    FROM picked
    WINDOW w AS (PARTITION BY k ORDER BY priority DESC, run_at, id)
), roomy AS (
    SELECT c.*, CASE WHEN c.stride = 0 THEN now_turn.t
                     ELSE (c.pass + (c.rank - 1) * c.stride) / """
    + _S
    + """ END AS turn
    FROM cand c, (SELECT coalesce(min(pass / """
    + _S
    + """), 0) AS t FROM cand
                  WHERE stride > 0 AND rank = 1 AND (lim IS NULL OR running < lim)) now_turn
    WHERE c.lim IS NULL OR c.rank <= c.lim - c.running
)
SELECT id, k, pos, rank, ready, lim, running, pass, stride, turn,
       row_number() OVER (ORDER BY priority DESC, turn, run_at, id) <= :limit AS taken
FROM roomy ORDER BY priority DESC, turn, run_at, id
"""
)

TURNS_ADVANCE = """
-- A key's pass once the claim took its jobs (:pass), or the stored one plus :step if that
-- is further (a claim in another process moved it since it was read: never on SQLite, whose
-- claim holds the write lock, but the rule is PostgreSQL's).
INSERT INTO skiplock_key_turns (concurrency_key, pass) VALUES (:key, :pass)
ON CONFLICT (concurrency_key) DO UPDATE
SET pass = max(skiplock_key_turns.pass + :step, excluded.pass)
"""

KEY_TURNS_PRUNE = """
-- The turn rows of keys with no live job, among the :most keys after :after (key order).
DELETE FROM skiplock_key_turns WHERE concurrency_key IN (
    SELECT t.concurrency_key FROM (
        SELECT concurrency_key FROM skiplock_key_turns WHERE concurrency_key > :after
        ORDER BY concurrency_key LIMIT :most
    ) t
    WHERE NOT EXISTS (SELECT 1 FROM skiplock_jobs_live j
                      WHERE j.state IN ('pending', 'running') AND j.concurrency_key IS NOT NULL
                        AND j.concurrency_key = t.concurrency_key)
)
"""

KEY_TURNS_SLICE_END = """
SELECT max(concurrency_key), count(*) FROM (
    SELECT concurrency_key FROM skiplock_key_turns WHERE concurrency_key > :after
    ORDER BY concurrency_key LIMIT :most)
"""


def prune_turns(conn: sqlite3.Connection, after: str) -> str:
    """The turn rows of keys with no live job among the next ``KEY_TURNS_SLICE`` after
    ``after`` go, inside the caller's write transaction; where the next look starts."""
    args = {"after": after, "most": KEY_TURNS_SLICE}
    last, read = conn.execute(KEY_TURNS_SLICE_END, args).fetchone()
    conn.execute(KEY_TURNS_PRUNE, args)
    return str(last) if read >= KEY_TURNS_SLICE else ""


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
    transaction: the keys' passes advanced by what it takes, and where the next walk of these
    queues starts recorded."""
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
    walked = (pairs[-1][0], pairs[-1][1]) if len(pairs) == visit else None
    if not pairs:
        cursors[where] = None
        return []
    args = {"pairs": json.dumps(pairs), "now": now, "limit": limit, "limited": limited}
    rows = [Candidate(*row) for row in conn.execute(PICK, args).fetchall()]
    taken = [r for r in rows if r.taken]
    for key, (pass_, step) in advanced(taken).items():
        conn.execute(TURNS_ADVANCE, {"key": key, "pass": pass_, "step": step})
    start = next_start(rows, taken, limit)
    if start is None:
        cursors[where] = walked
    else:
        cursors[where] = cursor if start == 1 else (pairs[start - 2][0], pairs[start - 2][1])
    return [r.id for r in taken]


class Candidate(NamedTuple):
    """A PICK row: a ready job within its key's room, its key's state, and whether the claim
    takes it."""

    id: int
    key: str
    pos: int
    rank: int
    ready: int
    lim: int | None
    running: int
    pass_: int
    stride: int
    turn: int
    taken: int


def advanced(taken: Sequence[Candidate]) -> dict[str, tuple[int, int]]:
    """Each weighted key the claim took from: its pass once it took them, and by how much it
    moved."""
    moved: dict[str, tuple[int, int]] = {}
    for key in {r.key for r in taken if r.stride > 0}:
        mine = [r for r in taken if r.key == key]
        step = len(mine) * mine[0].stride
        moved[key] = (mine[0].pass_ + step, step)
    return moved


def next_start(rows: Sequence[Candidate], taken: Sequence[Candidate], limit: int) -> int | None:
    """The place in the walk of the first visited key still with work in the turn this claim
    started in (a job it read and did not take, or as many as it read, so maybe more, and
    room left), which the next walk starts at; None when every visited key is past that turn
    (the next walk goes on after them). postgres_key_turns_sql's ``started``, the same rule."""
    weighted = [r for r in rows if r.stride > 0]
    if not weighted:
        return None
    first_turn = min(r.turn for r in weighted)
    places = []
    for key, pos in {(r.key, r.pos) for r in weighted}:
        mine = [r for r in weighted if r.key == key and r.pos == pos]
        took = sum(1 for r in taken if r.key == key)
        head = mine[0]
        room = head.lim is None or head.lim - head.running > took
        more = head.ready > took or head.ready >= limit
        if room and more and (head.pass_ + took * head.stride) // TURN_UNITS == first_turn:
            places.append(pos)
    return min(places, default=None)
