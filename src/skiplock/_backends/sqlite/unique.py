"""SQLite's unique-key windows and replacing enqueues: the statements (``queries/unique.sql``)
``flows.replace_held``'s steps run (answered in enqueue.py) (docs/design.md, "Unique keys").

A key is held by the live table's partial unique index: a pending or running job, one parked
on a signal (``wait_for``: a waiting row with ``parked`` set, migration 24; a job waiting for
its parents holds none), or a succeeded one with ``unique_succeeded`` (kept in the live table
for it). A window (``unique_for``) is a succeeded job that keeps its key until
``unique_until``: once that has passed, the next enqueue of the key (or a requeue) clears the
old job's flag first, so the index lets the new one in. The index's predicate stays as it was
(it cannot name a time).
Everything runs inside the caller's write transaction: nothing can change between steps.
"""

from __future__ import annotations

import sqlite3

from .statements import STATEMENTS as sql


def release_passed(conn: sqlite3.Connection, key: str, scope: str, now: float) -> bool:
    """Whether a succeeded job kept ``key`` in ``scope`` past its window and has now let it
    go."""
    args = {"unique_key": key, "unique_scope": scope, "now": now}
    return conn.execute(sql.JOB_KEY_PASSED, args).rowcount > 0
