"""A job's own audit trail (its ``audit`` column) appended to within a bound, on both dialects.

Why: every person's action on a job (retry, cancel, requeue, discard, a signal) was appended to
the job's row, which was then rewritten whole: 4,000 signals to one job made a 360 kB array
and 81 MB of WAL, each signal costing more than the one before. Every action also goes to
``skiplock_audit`` (``app.audit_trail()``, pruned by age), so the row keeps only the last
``JOB_AUDIT_KEPT`` entries, and in front of them one entry that counts what was left out::

    {"at": <the newest left out's time>, "who": "skiplock",
     "what": "37 earlier actions left out", "omitted": 37}

The column stays a list of ``{at, who, what}`` objects (every reader of it is unchanged), a
row's list never holds more than ``JOB_AUDIT_KEPT + 1`` entries, and an append costs the same
at the 10th action and the 10,000th. A list longer than the bound (written before it) is cut
to it at its next append.

``pg_append``/``sqlite_append`` give the expression for ``SET audit = ...``: the column's
list with ``entry`` (an SQL expression making one object) added at the end, the oldest
dropped into the count past the bound.
"""

from __future__ import annotations

from .._limits import JOB_AUDIT_KEPT

OMITTED_WHO = "skiplock"
"""Who the entry counting the left-out actions is written by."""


def pg_append(entry: str, column: str = "audit") -> str:
    """PostgreSQL (jsonb): ``column`` with ``entry`` appended, bounded. ``n`` entries are
    kept; the count (an entry with ``omitted``, always first) is not one of them."""
    n = JOB_AUDIT_KEPT
    length = f"jsonb_array_length({column})"
    counted = f"coalesce(({column} -> 0 ->> 'omitted')::bigint, 0)"
    marked = f"CASE WHEN {column} -> 0 -> 'omitted' IS NOT NULL THEN 1 ELSE 0 END"
    # entries (the count aside) after the append: length - marked + 1; dropped: that - n
    dropped = f"({length} - ({marked}) + 1 - {n})"
    return f"""CASE WHEN {length} - ({marked}) < {n}
        THEN {column} || jsonb_build_array({entry})
        ELSE jsonb_build_array(jsonb_build_object(
                'at', {column} -> ({length} - {n}) -> 'at',
                'who', '{OMITTED_WHO}',
                'what', format('%s earlier actions left out', {counted} + {dropped}),
                'omitted', {counted} + {dropped}))
            || jsonb_path_query_array({column}, '$[$from to last]',
                                      jsonb_build_object('from', {length} - {n} + 1))
            || jsonb_build_array({entry}) END"""


def sqlite_append(entry: str, column: str = "audit") -> str:
    """SQLite (JSON text): the same list as ``pg_append``'s. The kept entries are copied in
    their order (``json_each`` walks the array in order; the subquery's ORDER BY keeps it)."""
    n = JOB_AUDIT_KEPT
    length = f"json_array_length({column})"
    counted = f"coalesce(json_extract({column}, '$[0].omitted'), 0)"
    marked = f"CASE WHEN json_type({column}, '$[0].omitted') IS NOT NULL THEN 1 ELSE 0 END"
    dropped = f"({length} - ({marked}) + 1 - {n})"
    return f"""CASE WHEN {length} - ({marked}) < {n}
        THEN json_insert({column}, '$[#]', {entry})
        ELSE (SELECT json_group_array(json(kept.v)) FROM (
            SELECT -1 AS k, json_object(
                'at', json_extract({column}, '$[' || ({length} - {n}) || '].at'),
                'who', '{OMITTED_WHO}',
                'what', printf('%d earlier actions left out', {counted} + {dropped}),
                'omitted', {counted} + {dropped}) AS v
            UNION ALL
            SELECT e.key, e.value FROM json_each({column}) e WHERE e.key >= {length} - {n} + 1
            UNION ALL
            SELECT 9223372036854775807, {entry}
            ORDER BY k) kept) END"""


def pg_action(at: str, who: str, what: str) -> str:
    """PostgreSQL: ``SET audit = ...`` for one person's action (SQL expressions each)."""
    return pg_append(f"jsonb_build_object('at', {at}, 'who', {who}, 'what', {what})")


def sqlite_action(at: str, who: str, what: str) -> str:
    """SQLite: ``SET audit = ...`` for one person's action (SQL expressions each)."""
    return sqlite_append(f"json_object('at', {at}, 'who', {who}, 'what', {what})")
