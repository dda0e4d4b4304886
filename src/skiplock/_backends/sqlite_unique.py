"""SQLite's unique-key windows and replacing enqueues: migration 13's text and the statements
``flows.replace_held``'s steps run (answered in sqlite_ops) (docs/design.md, "Unique keys").

A key is held by the live table's partial unique index: a pending or running job, or a
succeeded one with ``unique_succeeded`` (kept in the live table for it). A window
(``unique_for``) is a succeeded job that keeps its key until ``unique_until``: once that has
passed, the next enqueue of the key (or a requeue) clears the old job's flag first, so the
index lets the new one in. The index's predicate stays as it was (it cannot name a time).
Everything runs inside the caller's write transaction: nothing can change between steps.
"""

from __future__ import annotations

import sqlite3

MIGRATION_UNIQUE_WINDOWS = """
-- A succeeded job with a window keeps its key until then (unique_for=). The day tables gain
-- the column after the migrations (sqlite_history.follow_live).
ALTER TABLE skiplock_jobs_live ADD COLUMN unique_until REAL
"""

_HOLDS = "(state IN ('pending', 'running') OR (state = 'succeeded' AND unique_succeeded))"
"""The unique index's predicate, written as it is so the statements below can use it."""

JOB_KEY_PASSED = f"""
-- The succeeded job keeping :unique_key past its window (unique_until <= :now) lets it go.
UPDATE skiplock_jobs_live SET unique_succeeded = 0
WHERE unique_key = :unique_key AND {_HOLDS}
  AND state = 'succeeded' AND unique_until <= :now
"""

JOB_KEYS_PASSED = """
-- Every succeeded job past its window lets its key go (ahead of a person's requeue, which
-- may give a dead job its key back).
UPDATE skiplock_jobs_live SET unique_succeeded = 0
WHERE state = 'succeeded' AND unique_succeeded AND unique_until <= :now
"""

JOB_HOLDER_OF = f"""
-- The job holding :unique_key (live, or succeeded where the job asked for that).
SELECT id FROM skiplock_jobs_live WHERE unique_key = :unique_key AND {_HOLDS}
"""

JOB_REPLACE_PENDING = """
-- on_conflict="replace": the pending holder takes the enqueue's arguments, run time and
-- payload version.
UPDATE skiplock_jobs_live
SET args = :args, kwargs = :kwargs, run_at = :run_at, payload_version = :payload_version
WHERE id = :id AND state = 'pending' AND unique_key = :unique_key
"""

JOB_RELEASE_RUNNING_KEY = """
-- A debounce while the holder runs: it gives the key up (it read older arguments).
UPDATE skiplock_jobs_live SET unique_key = NULL
WHERE id = :id AND state = 'running' AND unique_key = :unique_key
"""


def release_passed(conn: sqlite3.Connection, key: str, now: float) -> bool:
    """Whether a succeeded job kept ``key`` past its window and has now let it go."""
    return conn.execute(JOB_KEY_PASSED, {"unique_key": key, "now": now}).rowcount > 0
