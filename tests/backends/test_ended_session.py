"""A pooled connection whose session the server ended a moment ago is not an outage.

asyncpg hands such a connection out when the server's FATAL message has arrived and the
socket's close has not: the next statement fails before anything is sent, with "cannot switch
to state 12; another operation (2) is in progress". The statement is run again on a fresh
connection; if that cannot be done, the error says what happened, not asyncpg's state.
(tests/test_backlog.py terminates a draining worker's sessions for real.)
"""

from __future__ import annotations

import asyncpg
import pytest

import skiplock
from skiplock._backends.params import JobHeartbeatManyParams, JobInsertManyParams
from skiplock._backends.postgres.errors import ended_session, retry_moved, wrapped
from skiplock.errors import BackendUnavailable

from .helpers import claim, new_job

STALE = "cannot switch to state 12; another operation (2) is in progress"


async def test_a_statement_meeting_an_ended_session_runs_again() -> None:
    tries: list[int] = []

    async def statement() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise asyncpg.exceptions.InternalClientError(STALE)
        return "rows"

    assert await retry_moved(statement) == "rows"
    assert len(tries) == 3


async def test_other_client_errors_are_not_run_again() -> None:
    tries: list[int] = []

    async def statement() -> str:
        tries.append(1)
        raise asyncpg.exceptions.InternalClientError("something else entirely")

    with pytest.raises(asyncpg.exceptions.InternalClientError):
        await retry_moved(statement)
    assert len(tries) == 1
    assert not ended_session(asyncpg.exceptions.InterfaceError(STALE))


def test_an_ended_session_left_over_is_named_for_what_it_is() -> None:
    with pytest.raises(BackendUnavailable) as caught, wrapped("job_get_available"):
        raise asyncpg.exceptions.InternalClientError(STALE)
    assert str(caught.value) == (
        "job_get_available: PostgreSQL unavailable: the server ended the session of a pooled"
        f" connection ({STALE})"
    )


async def test_a_heartbeat_meeting_a_moved_row_runs_again_not_an_outage(pg_url: str) -> None:
    """PostgreSQL refuses to lock a row a concurrent, committed update moved to another
    partition (the rotation moving a job to the long segment, an outcome moving it to history)
    even with SKIP LOCKED; the heartbeat runs again, as the claims and outcomes do. It had no
    retry, and under readers a worker logged "database unavailable: job_heartbeat_many"."""
    app = skiplock.App(pg_url)
    try:
        await app.migrate()
        backend = await app.backend()
        await backend.job_insert_many(JobInsertManyParams([new_job()]))
        (job,) = await backend.job_get_available(claim())
        real = backend._by_id  # type: ignore[attr-defined]
        tries: list[int] = []

        async def moved_once(*args: object) -> object:
            tries.append(1)
            if len(tries) == 1:
                raise asyncpg.exceptions.SerializationError(MOVED)
            return await real(*args)

        backend._by_id = moved_once  # type: ignore[attr-defined]
        held = [(job.id, job.lease_token)]
        assert await backend.job_heartbeat_many(JobHeartbeatManyParams(held, 60.0, 5.0)) == held
        assert len(tries) == 2
    finally:
        await app.close()


MOVED = "tuple to be locked was already moved to another partition due to concurrent update"
