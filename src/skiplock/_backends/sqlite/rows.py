"""What runs on the SQLite backend's thread inside a transaction it holds: inserts, the
completion's columns, the shared flows' answers, and inspection reads.

``sqlite.py`` owns the connection, the thread and the operations; these are the pieces each
operation composes, kept apart so that module stays the list of operations.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any

from ..._job import ClaimedJob, JobFilter, JobRecord
from ..job_rows import claimed_jobs, filter_values, job_record


def dt(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def opt_dt(value: float | None) -> datetime | None:
    return None if value is None else dt(value)


def claimed(rows: list[Any], *, as_listed: bool = False) -> list[ClaimedJob]:
    return claimed_jobs(rows, dt, as_listed=as_listed)


def records(conn: sqlite3.Connection, statement: str, args: Any) -> list[JobRecord]:
    """Inspection rows, by column name. Text is read as bytes and decoded by the reader, so a
    value that is not UTF-8 (written by another producer) is shown with a note, not an error;
    only this read pays for it (the connection's thread runs one operation at a time)."""
    conn.text_factory = bytes
    try:
        cursor = conn.execute(statement, args)
        names = [d[0] for d in cursor.description]
        return [job_record(dict(zip(names, row, strict=True))) for row in cursor.fetchall()]
    finally:
        conn.text_factory = str


def filter_params(where: JobFilter) -> dict[str, Any]:
    """A filter as the filtered statements take it: ids as a JSON array, times as seconds."""
    values = filter_values(where)
    if values["ids"] is not None:
        values["ids"] = json.dumps(values["ids"])
    for name in ("since", "until"):
        if values[name] is not None:
            values[name] = values[name].timestamp()
    return values
