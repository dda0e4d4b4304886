"""SQLite durability as a choice in the URL: ``synchronous=full`` by default, ``normal`` on
request, anything else refused at the edge with the option named."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import skiplock
from skiplock._backends.sqlite.url import parse_sqlite_url


async def synchronous_level(url: str) -> int:
    """The ``PRAGMA synchronous`` the backend's own connection runs with (1 NORMAL, 2 FULL)."""
    app = skiplock.App(url)
    try:
        await app.migrate()
        backend = await app.backend()
        conn = backend._conn  # type: ignore[attr-defined]
        assert isinstance(conn, sqlite3.Connection)
        level = await backend._thread.call(  # type: ignore[attr-defined]
            lambda: conn.execute("PRAGMA synchronous").fetchone()[0]
        )
        return int(level)
    finally:
        await app.close()


async def test_full_is_the_default(tmp_path: Path) -> None:
    assert await synchronous_level(f"sqlite:///{tmp_path / 'a.db'}") == 2


@pytest.mark.parametrize("value", ["normal", "NORMAL"])
async def test_normal_on_request(tmp_path: Path, value: str) -> None:
    assert await synchronous_level(f"sqlite:///{tmp_path / 'a.db'}?synchronous={value}") == 1


async def test_full_may_be_said_explicitly(tmp_path: Path) -> None:
    assert await synchronous_level(f"sqlite:///{tmp_path / 'a.db'}?synchronous=full") == 2


@pytest.mark.parametrize("value", ["off", "extra", "", "1"])
def test_other_levels_are_refused_naming_the_option(value: str) -> None:
    with pytest.raises(skiplock.ConfigurationError, match="synchronous=") as raised:
        skiplock.App(f"sqlite:///jobs.db?synchronous={value}")
    assert "synchronous=full" in str(raised.value)


def test_an_unknown_option_is_refused_by_name() -> None:
    with pytest.raises(skiplock.ConfigurationError, match="'sync'"):
        skiplock.App("sqlite:///jobs.db?sync=normal")


def test_the_path_is_the_url_without_its_options() -> None:
    assert parse_sqlite_url("sqlite:////abs/jobs.db?synchronous=normal").path == "/abs/jobs.db"
    assert parse_sqlite_url("sqlite:///rel.db").synchronous == "full"
