"""PostgreSQL's storage shape: the job table split by state into partitions, and the DDL that
keeps the history partitions ahead of time and drops the expired ones.

Why (docs/design.md, "Storage"): every job used to be one row updated in place and kept for its
retention, so the table the claims walked also held every finished job, and a vacuum of it read
all of its indexes: stock autovacuum could not keep up with the churn, and pruning was a delete
of each row. Now ``skiplock_jobs`` is a table partitioned by ``state``:

- ``skiplock_jobs_live`` (pending, running): the only rows claims, heartbeats and completions
  touch; small, so its vacuum is cheap, and vacuumed eagerly (its own autovacuum settings);
- ``skiplock_jobs_done`` (succeeded, cancelled), itself partitioned by ``finished_at`` into one
  partition a day (UTC) and a default: a job moves there when it finishes (PostgreSQL's row
  movement: the UPDATE to a final state deletes it from the live partition and inserts it
  here), is never updated again by a worker, and leaves with its whole day's partition;
- ``skiplock_jobs_dead`` (dead): kept longer (its own retention) and acted on by people.

Queries name ``skiplock_jobs`` with literal states, so the planner prunes to the partitions they
can touch and locks only those: a claim never locks, and so never waits on, a history partition.

Unique keys live in ``skiplock_keys`` (a unique index cannot span partitions keyed by another
column): a row for every key a live job holds, or a succeeded job that asked to keep it. Triggers
on the partitions, firing only for rows that have a key, take and release it, so every way a job
changes state (a worker, a person, a user's own SQL) keeps the table true.
"""

from __future__ import annotations

from ...sql_files import fill_names
from . import QUERIES

LONG_SEGMENT = 3
"""The segment for live jobs that outlive their generation: delayed, retrying, long-running.
Vacuumed, never detached; a job moves here at most once."""


GEN_FIRST = 16
"""The first number a generation of the live partition takes (0-2 were migration 12's ring,
3 is the long segment, 4 the keyed one)."""
GEN_LAST = 32767
"""The last (``segment`` is a smallint); the numbers are reused in a cycle, each once its old
tables are gone."""

POINTER = "skiplock_live_segment"
"""The sequence whose last value is the generation new jobs go to: moved by the rotation
(``setval``) once the generation's tables are committed; never advanced by ``nextval``."""


GENERATION_DDL = (
    "GENERATION_WRAPPER",
    "GENERATION_TABLE",
    "GENERATION_PENDING_INDEX",
    "GENERATION_QUEUE_PENDING_INDEX",
    "GENERATION_LEASE_INDEX",
    "GENERATION_RECLAIMED_INDEX",
    "GENERATION_ATTACH",
)
"""A generation's DDL in the order it runs (``storage/queries/generations.sql``)."""


def segment_name(segment: int) -> str:
    """The table of live generation ``segment`` (its rows)."""
    return f"skiplock_jobs_live_s{segment}"


def wrapper_name(segment: int) -> str:
    """The partitioned table generation ``segment``'s table is attached under."""
    return f"skiplock_jobs_live_s{segment}_p"


def generation_sql(schema: str, segment: int) -> list[str]:
    """Generation ``segment``'s wrapper and table, made apart from the job table (a CREATE ...
    PARTITION OF the live partition would take its ACCESS EXCLUSIVE lock), then attached: the
    live partition's checks and triggers reach them at the attach, and its indexes adopt the
    table's own, made first under the names every segment's have. The templates of
    ``GENERATION_DDL`` with this generation's names filled in (``sql_files.fill_names``)."""
    table = segment_name(segment)
    names: dict[str, str | int] = {
        "wrapper": wrapper_name(segment),
        "table": table,
        "segment": segment,
        "pending_idx": f"{table}_pending_idx",
        "queue_pending_idx": f"{table}_queue_pending_idx",
        "lease_idx": f"{table}_lease_idx",
        "reclaimed_idx": f"{table}_reclaimed_idx",
    }
    return [fill_names(QUERIES[name], schema, **names) for name in GENERATION_DDL]
