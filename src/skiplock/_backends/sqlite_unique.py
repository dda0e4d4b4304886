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

MIGRATION_UNIQUE_SCOPES = f"""
-- A unique key is unique within a key space (docs/design.md, "Unique keys: scopes"): the
-- task's own (unique_scope holds the task's name) or the shared one (the empty text,
-- unique_scope="shared"). The keys held before were one space for every task: they become
-- their tasks' own, the rule from now on, which no two of them can break (they were unique
-- across all tasks). Rows of the day tables keep NULL: the task's own, should a person
-- retry one. The day tables gain the column after the migrations (sqlite_history.follow_live)
-- and no semicolon may stand in a comment: migrate splits on them.
ALTER TABLE skiplock_jobs_live ADD COLUMN unique_scope TEXT;
UPDATE skiplock_jobs_live SET unique_scope = task WHERE unique_key IS NOT NULL;
DROP INDEX skiplock_jobs_unique_idx;
CREATE UNIQUE INDEX skiplock_jobs_unique_idx ON skiplock_jobs_live (unique_key, unique_scope)
    WHERE unique_key IS NOT NULL AND {_HOLDS}
"""

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
-- A debounce while the holder, a job of its task, runs: it gives the key up (it read older
-- arguments). Another task's running job keeps its key.
UPDATE skiplock_jobs_live SET unique_key = NULL, unique_scope = NULL
WHERE id = :id AND state = 'running' AND unique_key = :unique_key
  AND unique_scope = :unique_scope AND task = :task
"""


def release_passed(conn: sqlite3.Connection, key: str, scope: str, now: float) -> bool:
    """Whether a succeeded job kept ``key`` in ``scope`` past its window and has now let it
    go."""
    args = {"unique_key": key, "unique_scope": scope, "now": now}
    return conn.execute(JOB_KEY_PASSED, args).rowcount > 0
