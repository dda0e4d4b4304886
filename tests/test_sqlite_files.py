"""The SQLite file and its -wal/-shm (and skiplock's id ledger, -ids) are created readable by
their owner alone (issue 22 low 8): jobs carry arguments and results. ``?mode=`` chooses
another mode for a new file; an existing file keeps the mode it has."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

import skiplock


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)  # the usual umask: files 0644 unless skiplock says otherwise
    yield
    os.umask(old)


def _modes(db: Path) -> dict[str, int]:
    return {
        p.name: stat.S_IMODE(p.stat().st_mode)
        for p in (db, *(db.with_name(db.name + end) for end in ("-wal", "-shm", "-ids")))
    }


async def _open_and_enqueue(url: str) -> skiplock.App:
    app = skiplock.App(url)

    @app.task
    async def noop() -> None:
        pass

    await app.migrate()
    await noop.aenqueue()
    return app


async def test_a_new_database_and_its_wal_files_are_0600(tmp_path: Path, umask_022: None) -> None:
    db = tmp_path / "jobs.db"
    app = await _open_and_enqueue(f"sqlite:///{db}")
    try:
        assert _modes(db) == {
            "jobs.db": 0o600,
            "jobs.db-wal": 0o600,
            "jobs.db-shm": 0o600,
            "jobs.db-ids": 0o600,  # the id ledger (sqlite_ids.py)
        }
    finally:
        await app.close()


async def test_mode_chooses_the_mode_of_a_new_file(tmp_path: Path, umask_022: None) -> None:
    db = tmp_path / "jobs.db"
    app = await _open_and_enqueue(f"sqlite:///{db}?mode=0640")
    try:
        assert set(_modes(db).values()) == {0o640}
    finally:
        await app.close()


async def test_an_existing_file_keeps_its_mode(tmp_path: Path, umask_022: None) -> None:
    db = tmp_path / "jobs.db"
    db.touch(mode=0o660)
    db.chmod(0o660)
    app = await _open_and_enqueue(f"sqlite:///{db}")
    try:
        assert _modes(db)["jobs.db"] == 0o660
        assert _modes(db)["jobs.db-ids"] == 0o660  # as SQLite's -wal: whoever writes it
    finally:
        await app.close()


async def test_an_existing_world_readable_file_is_used_with_a_warning(
    tmp_path: Path, umask_022: None, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "jobs.db"
    app = await _open_and_enqueue(f"sqlite:///{db}")
    await app.close()
    db.chmod(0o644)  # as a copy or an older release left it
    caplog.set_level("WARNING", logger="skiplock.worker")
    again = skiplock.App(f"sqlite:///{db}")
    try:
        assert await again.counts()  # it is used
    finally:
        await again.close()
    said = [r.getMessage() for r in caplog.records if "readable by every user" in r.getMessage()]
    assert said == [
        f"the SQLite file {db} is readable by every user of this host (mode 0644): its jobs "
        f"carry arguments, results and errors; `chmod o-rw {db}` keeps them from other users"
    ]
    caplog.clear()
    db.chmod(0o640)  # a group may read it on purpose: no warning
    quiet = skiplock.App(f"sqlite:///{db}")
    try:
        await quiet.counts()
    finally:
        await quiet.close()
    assert not [r for r in caplog.records if "readable by every user" in r.getMessage()]


@pytest.mark.parametrize("mode", ["644x", "0o600", "1777", "0400", "", "99999"])
def test_a_bad_mode_is_refused_naming_it(tmp_path: Path, mode: str) -> None:
    with pytest.raises(skiplock.ConfigurationError, match="mode='"):
        skiplock.App(f"sqlite:///{tmp_path / 'x.db'}?mode={mode}")
