"""SQLite's unique-key windows and replacing enqueues: migration 13's text and the statements
``flows.replace_held``'s steps run (answered in sqlite_ops) (docs/design.md, "Unique keys").

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


def holds(row: str = "") -> str:
    """The unique index's predicate (migration 24 on), for row ``row`` (an alias and a dot, or
    nothing): written as the index has it, so a statement that names it can use the index."""
    return (
        f"({row}state IN ('pending', 'running') OR ({row}state = 'waiting' AND {row}parked)"
        f" OR ({row}state = 'succeeded' AND {row}unique_succeeded))"
    )


_HOLDS = holds()
"""The unique index's predicate, written as it is so the statements below can use it."""

JOB_KEY_PASSED = f"""
-- The succeeded job keeping :unique_key in :unique_scope past its window (unique_until <=
-- :now) lets it go.
UPDATE skiplock_jobs_live SET unique_succeeded = 0
WHERE unique_key = :unique_key AND unique_scope = :unique_scope AND {_HOLDS}
  AND state = 'succeeded' AND unique_until <= :now
"""

JOB_KEYS_PASSED = """
-- Every succeeded job past its window lets its key go (ahead of a person's requeue, which
-- may give a dead job its key back).
UPDATE skiplock_jobs_live SET unique_succeeded = 0
WHERE state = 'succeeded' AND unique_succeeded AND unique_until <= :now
"""

JOB_HOLDER_OF = f"""
-- The job holding :unique_key in :unique_scope (live, or succeeded where the job asked for
-- that).
SELECT id FROM skiplock_jobs_live
WHERE unique_key = :unique_key AND unique_scope = :unique_scope AND {_HOLDS}
"""

JOB_REPLACE_PENDING = """
-- on_conflict="replace": the pending holder, a job of the enqueue's task, takes its
-- arguments, run time and payload version (another task's job in the shared key space is
-- left as it is: its function must not run with these arguments).
UPDATE skiplock_jobs_live
SET args = :args, kwargs = :kwargs, run_at = :run_at, payload_version = :payload_version
WHERE id = :id AND state = 'pending' AND unique_key = :unique_key
  AND unique_scope = :unique_scope AND task = :task
"""

JOB_RELEASE_RUNNING_KEY = """
-- A debounce while the holder, a job of its task, runs (or is parked on a signal, part way
-- through its run): it gives the key up (it read older arguments). Another task's running or
-- parked job keeps its key.
UPDATE skiplock_jobs_live SET unique_key = NULL, unique_scope = NULL
WHERE id = :id AND (state = 'running' OR (state = 'waiting' AND parked))
  AND unique_key = :unique_key
  AND unique_scope = :unique_scope AND task = :task
"""


def release_passed(conn: sqlite3.Connection, key: str, scope: str, now: float) -> bool:
    """Whether a succeeded job kept ``key`` in ``scope`` past its window and has now let it
    go."""
    args = {"unique_key": key, "unique_scope": scope, "now": now}
    return conn.execute(JOB_KEY_PASSED, args).rowcount > 0
