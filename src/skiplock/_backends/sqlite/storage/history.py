"""SQLite's history apart from the live jobs (migration 11): a table per UTC day of finishes.

From migration 11 the jobs workers touch are in ``skiplock_jobs_live`` (pending, running, dead,
and the few finished rows nothing moved), and a succeeded or cancelled job leaves it with the
completion batch that finished it, in the same transaction, for ``skiplock_jobs_done_pYYYYMMDD``:
the table of the UTC day it finished, made on demand. ``skiplock_jobs`` is a view, the union of
them all, so every read of "all jobs" (users' own SQL, the dashboard, the Django admin, a job's
result) sees one table with the same columns as before; writes name the live table.

Why: a prune of a million finished rows from the one table was a batched ``DELETE`` that
rewrote every page it touched into the WAL and held the file's one write lock for seconds
(5.8 s, the drain beside it at 20 % of its rate). A whole day past the retention is now a
``DROP TABLE``: its pages go to the free list without being rewritten (a million rows in about
half a second). The claim indexes were already partial (pending rows only), so the hot path's
reads did not need the split; its writes pay the move (an insert and a delete per finished job,
in the completion's own transaction).

Rows that stay in the live table until their retention deletes them, as before: a succeeded job
that keeps its unique key (``unique_while="live_or_succeeded"``: the partial unique index on the
live table is what holds the key), jobs finished by other paths (a person's cancel or discard, a
reclaim of a job whose cancel was asked for, a Django import), a new day's finishes while
MAX_DAYS day tables are kept, and every finished row an upgrade found (migration 11 moves
nothing: it renames the table and makes the view).

Every change of the set of day tables rebuilds the view in the same transaction; a later
migration that adds a column must add it to every day table and rebuild the view too.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, date, datetime, timedelta
from typing import Any

from ...sql_files import each, fill, listing
from ..statements import STATEMENTS as sql

LIVE = "skiplock_jobs_live"
VIEW = "skiplock_jobs"
DAY_PREFIX = "skiplock_jobs_done_p"
_DAY_NAME = re.compile(r"^skiplock_jobs_done_p(\d{8})$")

MOVES = frozenset({"succeeded", "cancelled"})
"""The outcomes after which a completion moves its job to the day's table."""


def day_name(day: date) -> str:
    return f"{DAY_PREFIX}{day:%Y%m%d}"


def day_of(epoch_s: float) -> date:
    return datetime.fromtimestamp(epoch_s, UTC).date()


def bounds(day: date) -> tuple[float, float]:
    """The day's first instant and the next day's, in Unix seconds (UTC)."""
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return start.timestamp(), (start + timedelta(days=1)).timestamp()


def days(conn: sqlite3.Connection) -> list[tuple[date, str]]:
    """The day tables there are, oldest first."""
    rows = conn.execute(sql.DAY_TABLES, (DAY_PREFIX + "[0-9]*",)).fetchall()
    found = []
    for (name,) in rows:
        match = _DAY_NAME.match(name)
        if match:
            found.append((datetime.strptime(match.group(1), "%Y%m%d").date(), str(name)))
    return sorted(found)


def _exists(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute(sql.TABLE_EXISTS, (name,)).fetchone()
    return row is not None


def columns(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """The live table's columns (name, declared type), in order: every day table has them."""
    return [(str(r[1]), str(r[2])) for r in conn.execute(fill(sql.TABLE_INFO, table=LIVE))]


def follow_live(conn: sqlite3.Connection) -> None:
    """Give every day table the columns a migration added to the live table since it was
    made (nullable, as every added column is), so a move copies them and the view's union
    lines up; then rebuild the view."""
    live = columns(conn)
    for _, table in days(conn):
        have = {str(r[1]) for r in conn.execute(fill(sql.TABLE_INFO, table=table))}
        for name, kind in live:
            if name not in have:
                conn.execute(fill(sql.DAY_ADD_COLUMN, table=table, column=name, kind=kind).rstrip())
    rebuild_view(conn)


def rebuild_view(conn: sqlite3.Connection) -> None:
    """``skiplock_jobs`` as the union of the live table and every day table, columns named,
    with the triggers that let your own SQL write through it as it could write the table."""
    for statement in view_statements(conn):
        conn.execute(statement)


def view_statements(conn: sqlite3.Connection) -> list[str]:
    """What ``rebuild_view`` runs: the view dropped (its triggers go with it), made again over
    the live table and the day tables there are, and its triggers."""
    info = list(conn.execute(fill(sql.TABLE_INFO, table=LIVE)))
    names = listing(str(r[1]) for r in info)
    tables = days(conn)
    branches = each(
        sql.VIEW_BRANCH,
        "\nUNION ALL\n",
        [{"columns": names, "table": LIVE}] + [{"columns": names, "table": t} for _, t in tables],
    )
    return [
        sql.VIEW_DROP,
        fill(sql.VIEW_CREATE, branches=branches),
        *_write_triggers(info, tables),
    ]


def _write_triggers(info: list[Any], tables: list[tuple[date, str]]) -> list[str]:
    """INSTEAD OF triggers on the view, for SQL of yours that writes ``skiplock_jobs`` (as it
    did when it was a table), given the live table's ``PRAGMA table_info`` and the day tables:
    an insert goes to the live table, each column missing from it taking its default; an
    update or a delete reaches the row wherever it is. A day table holds only jobs finished
    within its day, succeeded or cancelled: a job an update takes out of that (made pending
    again, or its finish time moved) goes back to the live table, where claims look and the
    prune's batched delete finds it, so a prune removes exactly what its preview counts.
    Skiplock's own statements name the tables."""
    names = [str(r[1]) for r in info]
    cols = listing(names)
    values = listing(
        fill(sql.VIEW_INSERT_VALUE_OR_DEFAULT, column=str(r[1]), default=str(r[4]))
        if r[4] is not None
        else fill(sql.VIEW_INSERT_VALUE, column=str(r[1]))
        for r in info
    )
    sets = each(sql.VIEW_SET_COLUMN, ", ", [{"column": name} for name in names if name != "id"])
    update = [fill(sql.VIEW_UPDATE_LIVE, sets=sets)]
    delete = [fill(sql.VIEW_DELETE_FROM, table=LIVE)]
    for day, table in tables:
        lo, hi = bounds(day)
        update.append(
            fill(
                sql.VIEW_UPDATE_DAY, table=table, sets=sets, columns=cols, lo=repr(lo), hi=repr(hi)
            )
        )
        delete.append(fill(sql.VIEW_DELETE_FROM, table=table))
    return [
        fill(sql.VIEW_INSERT_TRIGGER, columns=cols, values=values),
        fill(sql.VIEW_UPDATE_TRIGGER, statements=listing(update, "\n")),
        fill(sql.VIEW_DELETE_TRIGGER, statements=listing(delete, "\n")),
    ]


def ensure_day(conn: sqlite3.Connection, day: date) -> str:
    """The day's table, made (with its indexes, and the view rebuilt) if it is not there yet.
    Inside the caller's write transaction: a finish in a new day makes its table first."""
    name = day_name(day)
    if not _exists(conn, name):
        _make_day(conn, name)
    return name


def _make_day(conn: sqlite3.Connection, name: str) -> None:
    cols = [
        sql.DAY_COLUMN_ID if col == "id" else fill(sql.DAY_COLUMN, column=col, kind=kind).rstrip()
        for col, kind in columns(conn)
    ]
    conn.execute(fill(sql.DAY_CREATE, table=name, columns=listing(cols, ",\n    ")))
    # The windows the health numbers read (finishes, reclaims) and the prune's range.
    conn.execute(fill(sql.DAY_FINISHED_INDEX, table=name))
    conn.execute(fill(sql.DAY_RECLAIMED_INDEX, table=name))
    rebuild_view(conn)


MAX_DAYS = 400
"""Day tables kept at most: the view is a compound SELECT of one branch a table, and SQLite
refuses more than 500 branches (SQLITE_MAX_COMPOUND_SELECT's default). A retention longer
than this many days keeps the finishes of the days past it in the live table, as before the
split (found by their partial indexes, pruned by the batched delete)."""


def day_target(conn: sqlite3.Connection, now: float) -> tuple[str, tuple[str, ...]] | None:
    """The table a finish at ``now`` goes to (made if missing: inside the completion's write
    transaction, the first finish of a day makes its table) and the columns a move copies;
    None when a new day's table would pass MAX_DAYS."""
    table = day_name(day_of(now))
    if not _exists(conn, table):
        if len(days(conn)) >= MAX_DAYS:
            return None
        _make_day(conn, table)
    return table, tuple(name for name, _ in columns(conn))


def move_back(conn: sqlite3.Connection, job_id: int) -> bool:
    """Bring one finished job from its day table back into the live table (a person's retry
    of it); False if no day table holds it (it is in the live table, or nowhere)."""
    names = listing(name for name, _ in columns(conn))
    for _, table in days(conn):
        moved = conn.execute(
            fill(sql.DAY_MOVE_BACK, columns=names, table=table), (job_id,)
        ).rowcount
        if moved:
            conn.execute(fill(sql.DAY_DELETE_ONE, table=table), (job_id,))
            return True
    return False


def drop_expired(conn: sqlite3.Connection, finished_before: float) -> int:
    """Drop the oldest day table whose whole day ended by ``finished_before``; the rows it
    held (counted under the write lock the drop holds, so it is what went), 0 if none. One
    day a call: the drop holds the file's one write lock throughout, so workers' claims and
    completions get their turns between days (the prune calls until nothing is left)."""
    for day, table in days(conn)[:1]:
        if bounds(day)[1] > finished_before:
            return 0
        removed = int(conn.execute(fill(sql.DAY_COUNT, table=table)).fetchone()[0])
        conn.execute(fill(sql.DAY_DROP, table=table))
        rebuild_view(conn)
        return removed
    return 0


def prune_days(conn: sqlite3.Connection, finished_before: float, batch: int) -> int:
    """Delete one batch of rows finished before ``finished_before`` from the day tables the
    cut-off falls inside (whole days past it are dropped, not deleted); rows deleted."""
    deleted = 0
    for day, table in days(conn):
        if bounds(day)[0] >= finished_before or deleted >= batch:
            break
        deleted += conn.execute(
            fill(sql.DAY_PRUNE, table=table),
            {"before": finished_before, "batch": batch - deleted},
        ).rowcount
    return int(deleted)
