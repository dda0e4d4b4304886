"""The harness's ``Cli.freeze``: a SIGSTOP that never leaves SQLite's write lock with the
stopped process (test_health and test_crash stop a worker and then write to its database)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import Cli, sqlite_writable

# Holds the write lock nine tenths of the time: a plain SIGSTOP lands inside it nearly always.
HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
print("ready", flush=True)
while True:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO t VALUES (1)")
    time.sleep(0.009)
    conn.execute("COMMIT")
    time.sleep(0.001)
"""


@pytest.mark.slow
def test_freeze_stops_a_busy_writer_outside_its_transaction(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        cli = Cli(f"sqlite:///{path}", tmp_path)
        for _ in range(20):
            cli.freeze(holder)
            assert sqlite_writable(path)  # a plain SIGSTOP fails this about nine times in ten
            holder.send_signal(signal.SIGCONT)
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
