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

from ..claim_rules import KEY_TURNS_SLICE, TURN_UNITS, KeyCursors, keys_to_visit
from .statements import STATEMENTS as sql


def prune_turns(conn: sqlite3.Connection, after: str) -> str:
    """The turn rows of keys with no live job among the next ``KEY_TURNS_SLICE`` after
    ``after`` go, inside the caller's write transaction; where the next look starts."""
    args = {"after": after, "most": KEY_TURNS_SLICE}
    last, read = conn.execute(sql.KEY_TURNS_SLICE_END, args).fetchone()
    conn.execute(sql.KEY_TURNS_PRUNE, args)
    return str(last) if read >= KEY_TURNS_SLICE else ""


def _next_pair(
    conn: sqlite3.Connection, queues: Sequence[str] | None, after: tuple[str, str], lane: str
) -> tuple[str, str] | None:
    """The walk's next pair of ``lane`` after ``after``: one probe, or one a served queue (so
    another queue's keys are never read)."""
    if queues is None:
        args = {"queue": after[0], "key": after[1], "lane": lane}
        row = conn.execute(sql.NEXT_PAIR, args).fetchone()
        return None if row is None else (str(row[0]), str(row[1]))
    for queue in sorted(q for q in queues if q >= after[0]):
        since = after[1] if queue == after[0] else ""
        args = {"queue": queue, "key": since, "lane": lane}
        key = conn.execute(sql.NEXT_KEY_IN_QUEUE, args).fetchone()[0]
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
    lane: str,
) -> list[int]:
    """The ids of the keyed jobs to claim now (at most ``limit``), inside the caller's write
    transaction: the keys' passes advanced by what it takes, and where the next walk of these
    queues starts recorded."""
    where = (None if queues is None else tuple(queues), limited, lane)
    cursor = cursors.get(where)
    after = cursor or ("", "")
    visit = keys_to_visit(limit)
    pairs: list[tuple[str, str, int]] = []
    lap = 0
    while len(pairs) < visit:
        found = _next_pair(conn, queues, after, lane)
        if found is None and lap == 0 and cursor is not None:
            lap, found = 1, _next_pair(conn, queues, ("", ""), lane)  # round again from the first
        if found is None or (lap == 1 and cursor is not None and found > cursor):
            break  # every pair visited once
        after = found
        pairs.append((*found, len(pairs) + 1))
    walked = (pairs[-1][0], pairs[-1][1]) if len(pairs) == visit else None
    if not pairs:
        cursors[where] = None
        return []
    args = {"pairs": json.dumps(pairs), "now": now, "limit": limit, "limited": limited}
    args["lane"] = lane
    rows = [Candidate(*row) for row in conn.execute(sql.PICK, args).fetchall()]
    taken = [r for r in rows if r.taken]
    for key, (pass_, step) in advanced(taken).items():
        conn.execute(sql.TURNS_ADVANCE, {"key": key, "pass": pass_, "step": step})
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
