"""Inspection reads never fail on a row they cannot fully read: they show it, with a note.

Another producer (or a person with a SQL prompt) may write what skiplock never would: a run_at
beyond Python's datetime range, or on SQLite args that are not UTF-8 or not JSON. job_get and
job_list must still list and show such a job, its ``problems`` saying what could not be read.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import skiplock
from skiplock._backends import Backend
from skiplock._backends.params import JobInsertManyParams, JobListParams
from skiplock._job import JobFilter, JobRecord

from .helpers import new_job, write_raw

FAR = datetime.max.replace(tzinfo=UTC)


@pytest.fixture
async def backend(app: skiplock.App) -> Backend:
    return await app.backend()


async def shown(backend: Backend, job_id: int) -> JobRecord:
    record = await backend.job_get(job_id)
    (listed,) = [r for r in await backend.job_list(JobListParams(JobFilter())) if r.id == job_id]
    assert listed == record
    return record


@pytest.mark.parametrize(
    ("sqlite_value", "pg_value"),
    [("253402300800.0", "'20000-01-01'"), ("9e999", "'infinity'")],
    ids=["year-10000", "infinity"],
)
async def test_a_run_at_beyond_the_datetime_range_is_shown(
    app: skiplock.App, backend: Backend, sqlite_value: str, pg_value: str
) -> None:
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job()]))
    await write_raw(
        app,
        f"UPDATE skiplock_jobs_live SET run_at = {sqlite_value} WHERE id = ?",
        f"UPDATE skiplock_jobs SET run_at = {pg_value} WHERE id = $1",
        job_id,
    )
    record = await shown(backend, job_id)
    assert record.run_at == FAR
    assert record.args == [1]
    assert any("run_at" in p for p in record.problems), record.problems


async def test_a_job_in_range_has_no_problems(backend: Backend) -> None:
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job()]))
    assert (await shown(backend, job_id)).problems == []


async def test_sqlite_text_that_is_not_utf8_or_not_json_is_shown(sqlite_url: str) -> None:
    app = skiplock.App(sqlite_url)
    await app.migrate()
    try:
        backend = await app.backend()
        (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job()]))
        await write_raw(
            app,
            "UPDATE skiplock_jobs_live SET args = CAST(X'5B31FF5D' AS TEXT), kwargs = 'not json',"
            " errors = '[{', correlation_id = CAST(X'FE' AS TEXT) WHERE id = ?",
            "",
            job_id,
        )
        record = await shown(backend, job_id)
        assert record.task == "t"
        assert record.args == [] and record.kwargs == {} and record.errors == []
        for column in ("args", "kwargs", "errors", "correlation_id"):
            assert any(p.startswith(column) for p in record.problems), (column, record.problems)
    finally:
        await app.close()


async def test_a_json_value_nested_too_deep_to_decode_is_shown(
    app: skiplock.App, backend: Backend
) -> None:
    """Valid JSON (PostgreSQL's jsonb takes it) that Python cannot decode without recursing
    past its limit: the row is listed with the column flagged, never a RecursionError."""
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job()]))
    deep = "[" * 10_000 + "]" * 10_000
    await write_raw(
        app,
        f"UPDATE skiplock_jobs_live SET args = '[{deep}]', errors = '[{deep}]' WHERE id = ?",
        f"UPDATE skiplock_jobs SET args = '[{deep}]', errors = '[{deep}]' WHERE id = $1",
        job_id,
    )
    record = await shown(backend, job_id)
    assert record.args == [] and record.errors == []
    for column in ("args", "errors"):
        assert any(p.startswith(f"{column}: nested") for p in record.problems), record.problems
