"""Who holds the storage's upkeep back (issue 44), on a real PostgreSQL and a real SQLite file:
the worker's rotation held by a reader's lock, its vacuum held by an old transaction's
horizon, and SQLite's checkpoints held by a reader's open transaction. Each is named once in
the log however many looks meet it, read by the worker's gauges and by ``skiplock stats``
(the real CLI, JSON and text), and its end is said once.

The services are driven a look at a time (``Rotator.turn``, ``Vacuumer.after``,
``Checkpointer.turn``), not by their timers."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

import skiplock
from skiplock import WorkerConfig
from skiplock._backends import Backend
from skiplock._backends.params import HOLD_MIN_S
from skiplock._backends.protocol import WAL_HELD_MIN_BYTES
from skiplock._observe.gauges import GaugeCache
from skiplock._observe.meter import Meter
from skiplock._worker import services
from skiplock._worker.services import Checkpointer, Rotator, Vacuumer
from skiplock.prometheus import SkiplockCollector, render

from .helpers import ROOT, own_pg_database

# --- what the three surfaces say -------------------------------------------------------------


def gauges(meter: Meter) -> dict[str, float]:
    """The worker's ``skiplock_storage_*`` series as ``/metrics`` renders them."""
    text = render(SkiplockCollector(meter, GaugeCache())).decode()
    found = re.findall(r"^(skiplock_storage_\w+(?:\{[^}]*\})?) (\S+)$", text, re.M)
    return {name: float(value) for name, value in found}


async def stats_cli(url: str, *args: str) -> str:
    """``skiplock stats --url URL *args``'s stdout (the real CLI, in a subprocess, off the
    event loop)."""
    paths = [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "COLUMNS": "200"}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "skiplock", "stats", "--url", url, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def warnings_naming(caplog: pytest.LogCaptureFixture, *words: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and all(w in r.getMessage() for w in words)
    ]


def infos(caplog: pytest.LogCaptureFixture, start: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.INFO and r.getMessage().startswith(start)
    ]


# --- PostgreSQL ------------------------------------------------------------------------------


@pytest.fixture
async def pg() -> AsyncIterator[tuple[str, str, Backend, asyncpg.Connection]]:
    """A migrated database of the test's own: its URL, schema, the app's backend and a plain
    session."""
    async with own_pg_database("holds") as url:
        app = skiplock.App(url)
        await app.migrate()
        conn = await asyncpg.connect(url.split("?")[0])
        try:
            yield url, "holds", await app.backend(), conn
        finally:
            await conn.close()
            await app.close()


async def older_than(conn: asyncpg.Connection, pid: int, seconds: float) -> None:
    """Until session ``pid``'s transaction is ``seconds`` old: only a transaction that old is
    named (a passing claim is not a holder), and the server's clock is what dates it."""
    deadline = time.monotonic() + 30
    while not await conn.fetchval(
        "SELECT now() - xact_start >= make_interval(secs => $2)"
        " FROM pg_stat_activity WHERE pid = $1",
        pid,
        seconds,
    ):
        assert time.monotonic() < deadline, f"session {pid}'s transaction never got old"
        await asyncio.sleep(0.05)


async def finished_in_newest_generation(conn: asyncpg.Connection, schema: str) -> None:
    """600 jobs written to the generation taking new jobs and finished, their dead versions
    counted: the generation a reader will hold once it is retired."""
    table = f'"{schema}".skiplock_jobs'
    await conn.execute(
        f"""INSERT INTO {table} (queue, task, state, max_attempts)
            SELECT 'default', 'done', 'pending', 3 FROM generate_series(1, 600)"""
    )
    async with conn.transaction():
        await conn.execute(
            f"UPDATE {table} SET state = 'succeeded', finished_at = now()"
            " WHERE state = 'pending' AND task = 'done'"
        )
        await conn.execute("SELECT pg_stat_force_next_flush()")


async def test_a_reader_holding_a_retired_generation_is_named_once_read_by_the_gauges_and_stats(
    pg: tuple[str, str, Backend, asyncpg.Connection],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A report in REPEATABLE READ holds ACCESS SHARE on every live generation it read until
    it ends: a retired one's detach waits for it, pending. From the third turn in a row that
    leaves it waiting, the worker names the session (pid, application name, state, its
    transaction's age, its query), once however many turns meet it; its gauges read the hold;
    ``skiplock stats`` shows who and what it costs. When the reader commits, the next turn
    finishes the detach and drops the table, and the end is said once."""
    url, schema, backend, conn = pg
    monkeypatch.setattr(services, "ROTATE_MIN_BYTES", 0)
    await finished_in_newest_generation(conn, schema)
    reader = await asyncpg.connect(
        url.split("?")[0], server_settings={"application_name": "nightly-report"}
    )
    try:
        await reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await reader.fetchval(f'SELECT count(*) FROM "{schema}".skiplock_jobs')
        pid = reader.get_server_pid()
        await older_than(conn, pid, HOLD_MIN_S)
        meter = Meter()
        rotator = Rotator(backend, WorkerConfig(), meter)
        with caplog.at_level(logging.INFO, logger="skiplock.worker"):
            for _ in range(8):
                await rotator.turn()
            # turn 2 retires the reader's generation (the first makes a new one, and the one
            # before the newest is kept): from then on it waits, while the ones made after the
            # reader's snapshot go as they are retired
            # (a wrapper's detach from the live partition, which the reader holds too, waits
            # as well)
            assert rotator.pending >= 1 and rotator.held_turns == 7
            dropped = rotator.dropped
            named = warnings_naming(caplog, f"pid {pid} ", "app 'nightly-report'")
            assert len(named) == 1, caplog.text
            line = named[0]
            assert re.match(r"[1-9] retired generation\(s\) of the live jobs wait", line), line
            assert "idle in transaction" in line and "transaction open " in line
            assert f'SELECT count(*) FROM "{schema}".skiplock_jobs' in line
            assert "dead row versions wait there" in line and "claims do not wait" in line
            assert "end that transaction, or see docs/operations/storage.md" in line
            assert len(warnings_naming(caplog, "retired generation")) == 1

            metrics = gauges(meter)
            assert metrics['skiplock_storage_held_seconds{hold="lock"}'] > 0
            assert metrics['skiplock_storage_held_dead_versions{hold="lock"}'] >= 600

            reading = json.loads(await stats_cli(url, "--json"))
            (lock,) = [h for h in reading["storage"] if h["hold"] == "lock"]
            (holder,) = lock["holders"]
            assert (holder["kind"], holder["pid"], holder["name"]) == (
                "session",
                pid,
                "nightly-report",
            )
            assert holder["state"] == "idle in transaction"
            assert holder["xact_age_s"] >= HOLD_MIN_S and holder["query_start"] is not None
            assert holder["query"] == f'SELECT count(*) FROM "{schema}".skiplock_jobs'
            assert any(r.endswith("skiplock_jobs_live_s16") for r in holder["relations"])
            assert lock["dead_versions"] >= 600
            text = await stats_cli(url)
            assert "storage upkeep held back" in text
            assert f"pid {pid} (app 'nightly-report', idle in transaction" in text

            await reader.execute("COMMIT")
            for _ in range(10):  # a pending table finished a turn, a wrapper a turn
                await rotator.turn()
                if rotator.pending == 0:
                    break
            assert rotator.dropped > dropped and rotator.pending == 0
            ended = infos(caplog, "retired live generations are dropped again after ")
            assert len(ended) == 1 and f"pid {pid} let go" in ended[0], caplog.text
            await rotator.turn()
            assert len(infos(caplog, "retired live generations are dropped again")) == 1
        assert gauges(meter)['skiplock_storage_held_seconds{hold="lock"}'] == 0
        after = json.loads(await stats_cli(url, "--json"))["storage"]
        assert [h for h in after if h["hold"] == "lock"] == []
    finally:
        await reader.close()


async def dead_live_rows(conn: asyncpg.Connection, schema: str, n: int) -> None:
    """``n`` dead versions in the live partition, counted in the statistics at once."""
    table = f'"{schema}".skiplock_jobs'
    await conn.execute(
        f"""INSERT INTO {table} (queue, task, state, max_attempts, attempt)
            SELECT 'default', 'gone', 'pending', 3, 0 FROM generate_series(1, $1)""",
        n,
    )
    async with conn.transaction():
        await conn.execute(f"DELETE FROM {table} WHERE task = 'gone'")
        await conn.execute("SELECT pg_stat_force_next_flush()")


async def test_an_idle_transaction_holding_the_horizon_is_named_once_and_its_end_said(
    pg: tuple[str, str, Backend, asyncpg.Connection],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A session left idle in a transaction that took an id keeps every version that died
    after it: each vacuum keeps them. From the third held vacuum on, the worker names the
    session once, its gauges read the hold and the versions kept, ``skiplock stats`` shows
    it; once it commits, the next vacuum removes them and the end is said once."""
    url, schema, backend, conn = pg
    holder = await asyncpg.connect(
        url.split("?")[0], server_settings={"application_name": "orm-session"}
    )
    try:
        await holder.execute("BEGIN")
        await holder.fetchval("SELECT txid_current()")
        pid = holder.get_server_pid()
        await dead_live_rows(conn, schema, 3_000)
        await older_than(conn, pid, HOLD_MIN_S)
        meter = Meter()
        vacuumer = Vacuumer(backend, WorkerConfig(rotate_interval_s=0), meter=meter)
        with caplog.at_level(logging.INFO, logger="skiplock.worker"):
            for _ in range(6):
                done = await backend.hot_vacuum(2_000)
                assert done is not None and done.held, done
                await vacuumer.after(done)
            named = warnings_naming(caplog, f"pid {pid} ", "app 'orm-session'")
            assert len(named) == 1, caplog.text
            line = named[0]
            assert line.startswith("vacuum of the live jobs kept "), line
            assert "holds the database's MVCC horizon" in line
            assert "idle in transaction" in line and "last query 'SELECT txid_current()'" in line
            assert "end that transaction, or see docs/operations/storage.md" in line
            assert len(warnings_naming(caplog, "vacuum of the live jobs")) == 1

            metrics = gauges(meter)
            assert metrics['skiplock_storage_held_seconds{hold="horizon"}'] > 0
            assert metrics['skiplock_storage_held_dead_versions{hold="horizon"}'] >= 3_000

            reading = json.loads(await stats_cli(url, "--json"))
            (horizon,) = [h for h in reading["storage"] if h["hold"] == "horizon"]
            first = horizon["holders"][0]
            assert (first["kind"], first["pid"], first["name"]) == ("session", pid, "orm-session")
            assert first["query"] == "SELECT txid_current()" and first["xmin_age"] >= 1
            assert horizon["dead_versions"] >= 3_000
            assert f"pid {pid} (app 'orm-session'" in await stats_cli(url)

            await holder.execute("COMMIT")
            done = await backend.hot_vacuum(2_000)
            assert done is not None and not done.held, done
            await vacuumer.after(done)
            ended = infos(caplog, "vacuum of the live jobs removes dead row versions again")
            assert len(ended) == 1 and f"pid {pid} no longer holds" in ended[0], caplog.text
        assert gauges(meter)['skiplock_storage_held_seconds{hold="horizon"}'] == 0
    finally:
        await holder.close()


# --- SQLite ----------------------------------------------------------------------------------


def wal_size(path: Path) -> int:
    return os.path.getsize(f"{path}-wal")


async def test_a_reader_holding_the_sqlite_wal_is_reported_and_the_file_shrinks_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A second connection holding a read transaction while jobs are written keeps every page
    written since in the -wal file: the checkpointer says so once (SQLite cannot name the
    reader), its gauges read the file's size and the hold, ``skiplock stats`` shows it. Once
    the reader ends, the next checkpoint completes and truncates the file, which SQLite alone
    would leave at its high-water size, and says so once with the size it came back to."""
    path = tmp_path / "held.db"
    url = f"sqlite:///{path}"
    app = skiplock.App(url)

    @app.task(name="big")
    def big(blob: str) -> None: ...

    await app.migrate()
    backend = await app.backend()
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM skiplock_jobs").fetchone()
        blob = "x" * 8_000
        for _ in range(30):  # ~24 MB of pages, each batch its own commit
            await app.enqueue_many([big.prepare(blob) for _ in range(100)])
        assert wal_size(path) > WAL_HELD_MIN_BYTES
        meter = Meter()
        checkpointer = Checkpointer(backend, WorkerConfig(), meter=meter)
        checkpointer.warn_after_s = 0.0  # the hold is there at the first look: no wait
        checkpointer.truncate_above = 4 << 20
        with caplog.at_level(logging.INFO, logger="skiplock.worker"):
            for _ in range(5):
                done = await checkpointer.turn()
                assert done is not None and done.complete is False, done
            held = warnings_naming(caplog, "WAL at ")
            assert len(held) == 1, caplog.text
            assert "a reader's open transaction is keeping it from being checkpointed" in held[0]
            assert "SQLite cannot say which connection holds it" in held[0]

            metrics = gauges(meter)
            assert metrics['skiplock_storage_held_seconds{hold="wal"}'] > 0
            assert metrics["skiplock_storage_wal_bytes"] > WAL_HELD_MIN_BYTES

            reading = json.loads(await stats_cli(url, "--json"))
            (wal,) = reading["storage"]
            assert wal["hold"] == "wal" and wal["holders"] == []
            assert wal["wal_bytes"] > WAL_HELD_MIN_BYTES
            assert wal["wal_pending_bytes"] > WAL_HELD_MIN_BYTES
            text = await stats_cli(url)
            assert "checkpoints cannot copy the write-ahead log back" in text
            assert "SQLite cannot say which connection's" in text

            reader.execute("COMMIT")
            done = await checkpointer.turn()
            assert done is not None and done.complete and done.truncated_to == 0, done
            assert wal_size(path) < checkpointer.truncate_above
            ended = infos(caplog, "WAL checkpointed again after ")
            assert len(ended) == 1 and "the file is 0 KB" in ended[0], caplog.text
        assert gauges(meter)['skiplock_storage_held_seconds{hold="wal"}'] == 0
        assert json.loads(await stats_cli(url, "--json"))["storage"] == []
    finally:
        reader.close()
        await app.close()
