"""Each of the conformance suite's three databases is the one its parameter names: a
``postgres18`` test that reached the shared server would pass there and test nothing on 18."""

from __future__ import annotations

import asyncpg
import pytest

from ..helpers import PG_URL, server_url


async def server(url: str) -> tuple[int, int]:
    """(server_version_num, the cluster's system identifier) of ``url``'s server."""
    conn = await asyncpg.connect(server_url(url))
    try:
        version = int(await conn.fetchval("SHOW server_version_num"))
        system = int(await conn.fetchval("SELECT system_identifier FROM pg_control_system()"))
        return version, system
    finally:
        await conn.close()


async def test_each_database_is_the_one_its_parameter_names(
    db_url: str, request: pytest.FixtureRequest
) -> None:
    name = request.node.callspec.params["db_url"]
    if name == "sqlite":
        assert db_url.startswith("sqlite:///")
        return
    version, system = await server(db_url)
    if name == "postgres":
        assert (version, system) == await server(PG_URL)
    else:
        assert name == "postgres18"
        assert system != (await server(PG_URL))[1]  # another cluster than the shared one
        assert version // 10000 == 18
