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

from skiplock._backends.postgres.errors import ended_session, retry_moved, wrapped
from skiplock.errors import BackendUnavailable

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
