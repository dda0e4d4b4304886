"""A PostgreSQL cluster of the bench's own, with stock settings, for the storage workloads.

The machine's shared server runs with ``autovacuum = off`` (its conf.d), so nothing measured
against it says what vacuum would do to a queue's table over time. The storage benchmarks
(W8-W11) therefore create a cluster with Debian's ``pg_createcluster`` on a free port, with the
server's stock settings (autovacuum on, stock cost limits), run against it, and drop it
afterwards, even when the run fails. ``SETTINGS`` are the server settings printed beside each
table: the ones that decide how fast dead tuples go away and what a commit costs.

Needs root or the ``postgres`` user (pg_createcluster runs the server as ``postgres``) and the
server's major version installed (``ls /usr/lib/postgresql``). The pgstattuple extension is
created when its files are present (``postgresql-contrib`` ships them in Debian's package).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"

SETTINGS = (
    "server_version",
    "autovacuum",
    "autovacuum_naptime",
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_insert_scale_factor",
    "autovacuum_vacuum_cost_delay",
    "autovacuum_vacuum_cost_limit",
    "vacuum_cost_limit",
    "autovacuum_max_workers",
    "shared_buffers",
    "synchronous_commit",
    "fsync",
    "max_connections",
)
"""What decides how fast a queue's dead tuples go away and what a commit costs."""


@dataclass(frozen=True)
class Cluster:
    """A running cluster: its version, name, port, and an admin URL to its ``postgres`` db."""

    version: str
    name: str
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


def installed_version() -> str:
    """The newest PostgreSQL major version with server binaries on this machine."""
    root = Path("/usr/lib/postgresql")
    found = (p.name for p in root.iterdir() if (p / "bin" / "postgres").exists())
    versions = sorted(found, key=int)
    if not versions:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
    return versions[-1]


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's pick; the cluster binds it at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def available() -> str | None:
    """Why a private cluster cannot be made here, or None when it can."""
    if shutil.which("pg_createcluster") is None:
        return "pg_createcluster is not installed (Debian's postgresql-common)"
    if os.geteuid() != 0:
        return "pg_createcluster needs root (the server runs as the postgres user)"
    try:
        installed_version()
    except (OSError, RuntimeError) as e:
        return str(e)
    return None


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@contextmanager
def stock_cluster(name: str | None = None, extra_conf: str = "") -> Iterator[Cluster]:
    """Create and start a stock cluster on a free port; stop and drop it on the way out.

    Only what a bench needs to connect is set (listen on 127.0.0.1, trust for local TCP);
    every vacuum and durability setting is the server's default. ``extra_conf``: lines added
    for a probe that asks for them (``benchmarks.readers --statements``), never by default.
    """
    why = available()
    if why:
        raise RuntimeError(f"cannot create a private PostgreSQL cluster: {why}")
    version = installed_version()
    name = name or f"skiplock_bench_{os.getpid()}"
    port = free_port()
    _run(
        "pg_createcluster", version, name, "--port", str(port), "--",
        "--auth-local=trust", "--auth-host=trust",
    )  # fmt: skip
    cluster = Cluster(version, name, port)
    try:
        conf = Path(f"/etc/postgresql/{version}/{name}/conf.d")
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "50-bench.conf").write_text("listen_addresses = '127.0.0.1'\n" + extra_conf)
        _run("pg_ctlcluster", "--skip-systemctl-redirect", version, name, "start")
        yield cluster
    finally:
        # the server's log outlives the cluster: a crash or a lock wait shows only there
        log = Path(f"/var/log/postgresql/postgresql-{version}-{name}.log")
        with contextlib.suppress(OSError):
            RESULTS.mkdir(exist_ok=True)
            shutil.copyfile(log, RESULTS / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.log")
        subprocess.run(
            ["pg_dropcluster", "--stop", version, name],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # pg_dropcluster leaves the folder our own conf.d file is in
        shutil.rmtree(f"/etc/postgresql/{version}/{name}", ignore_errors=True)


async def settings(url: str) -> dict[str, str]:
    """SETTINGS as the server reports them (``SHOW``), for the table's header."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT n, current_setting(n) AS v FROM unnest($1::text[]) AS n", list(SETTINGS)
        )
        out = {r["n"]: r["v"] for r in rows}
        return {k: out[k] for k in SETTINGS if k in out}
    finally:
        await conn.close()


async def create_database(admin_url: str, database: str) -> str:
    """A fresh database on the cluster (with pgstattuple when its files exist); its URL."""
    import asyncpg

    from .common import with_database

    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{database}"')
        await conn.execute(f'CREATE DATABASE "{database}"')
    finally:
        await conn.close()
    url = with_database(admin_url, database)
    conn = await asyncpg.connect(url)
    try:
        has = await conn.fetchval(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'pgstattuple'"
        )
        if has:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
    finally:
        await conn.close()
    return url


READER_SQL = (
    "SELECT state, count(*) FROM skiplock_jobs GROUP BY state",
    "SELECT id, queue, task, state, attempt, created_at, finished_at FROM skiplock_jobs"
    " ORDER BY id DESC LIMIT 50",
)
"""What each active reader runs, again and again, inside its one transaction: the counts by
state and the page of the newest jobs a dashboard or a report shows."""
HISTORY_READER_SQL = tuple(q.replace("skiplock_jobs", "skiplock_jobs_done") for q in READER_SQL)
"""W9done's readers: the same two reads of the history alone, as docs/operations/readers.md
tells a report to read finished jobs (``skiplock_jobs_done``): their snapshots hold the horizon
as W9's do, but they read and lock no live table."""
READERS = 4
READER_PAUSE_S = 0.1
"""The pause between two rounds of a reader's queries (the public harness's active readers
pause 100 ms between scans)."""


async def hold_horizon(
    url: str, how: str, seconds: float, tables: list[str] | None = None
) -> list[dict[str, Any]] | None:
    """Hold the MVCC horizon back for ``seconds``: ``idle``, one session idle in a transaction
    that took an xid (``BEGIN; SELECT txid_current();``); ``readers``, ``active_readers``
    (4 ``REPEATABLE READ`` transactions open for the whole time, reading ``skiplock_jobs``);
    ``cpu``, W9's control (4 processes on the CPU, no database). ``tables`` is unused (the
    readers read ``skiplock_jobs`` as a user's report would); kept for the callers."""
    import asyncio

    import asyncpg

    if how == "cpu":  # W9's control: the readers' CPU without their snapshots or reads
        await burn_cpu(seconds)
        return None
    if how == "readers":
        return await active_readers(url, seconds)
    if how == "idle":
        conn = await asyncpg.connect(url)
        tx = conn.transaction()
        await tx.start()
        await conn.fetchval("SELECT txid_current()")
        await asyncio.sleep(seconds)
        await tx.rollback()
        await conn.close()
        return None
    raise ValueError(f"unknown way to hold the horizon: {how!r}")


async def active_readers(
    url: str,
    seconds: float,
    count: int = READERS,
    pause_s: float = READER_PAUSE_S,
    queries: tuple[str, ...] = READER_SQL,
) -> list[dict[str, Any]]:
    """W9's readers, as the public harness (hardbyte/postgresql-job-queue-benchmarking,
    "active readers") runs them: ``count`` sessions that each open ONE ``REPEATABLE READ``
    transaction at the start and keep it open for ``seconds``, running ``queries`` in a loop
    inside it (``pause_s`` apart). Their snapshots hold the horizon and their ``ACCESS SHARE``
    locks stay on every partition of ``skiplock_jobs`` they read, the live segments included,
    until the end. A statement that fails (a table dropped under the reader) ends that
    transaction; the reader opens a new one and goes on, and the failure is counted.

    One dict per reader: ``rounds`` of queries, ``errors``, ``transactions`` opened (1 when
    nothing failed), ``transaction_s`` (the age of the last one at its end, by the server's
    clock: the whole phase when it never failed), ``cpu_s`` (its backend's CPU seconds, read
    from /proc: the bench runs on the server's machine) and ``cpu_trace``, ``[seconds since
    the start, CPU seconds so far]`` after every round, which W9twin replays
    (benchmarks/cpu_twin.py)."""
    import asyncio
    import time

    import asyncpg

    from .cpu_twin import backend_cpu

    started = time.monotonic()
    end = started + seconds

    async def reader() -> dict[str, Any]:
        conn = await asyncpg.connect(url)
        out: dict[str, Any] = {"rounds": 0, "errors": 0, "transactions": 0, "transaction_s": None}
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        base = backend_cpu(pid)
        trace: list[tuple[float, float]] = []
        try:
            while time.monotonic() < end:
                tx = conn.transaction(isolation="repeatable_read")
                await tx.start()
                out["transactions"] += 1
                try:
                    while time.monotonic() < end:
                        for sql in queries:
                            await conn.fetch(sql)
                        out["rounds"] += 1
                        t = round(time.monotonic() - started, 2)
                        trace.append((t, round(backend_cpu(pid) - base, 2)))
                        await asyncio.sleep(min(pause_s, max(0.0, end - time.monotonic())))
                    out["transaction_s"] = round(
                        await conn.fetchval(
                            "SELECT extract(epoch FROM clock_timestamp() - now())::float8"
                        ),
                        1,
                    )
                except asyncpg.PostgresError as e:
                    out["errors"] += 1
                    out["last_error"] = str(e)[:200]
                finally:
                    await tx.rollback()
            out["cpu_s"] = round(backend_cpu(pid) - base, 1)
            out["cpu_trace"] = trace
        finally:
            await conn.close()
        return out

    return list(await asyncio.gather(*(reader() for _ in range(count))))


BURN = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"


async def burn_cpu(seconds: float, processes: int = 4) -> None:
    """``processes`` processes spinning on the CPU for ``seconds``, touching no database: as
    many runnable processes as W9's readers, to tell what their CPU costs the queue from what
    their snapshots and scans do."""
    import asyncio
    import sys

    procs = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", BURN.format(s=seconds))
        for _ in range(processes)
    ]
    for proc in procs:
        await proc.wait()
