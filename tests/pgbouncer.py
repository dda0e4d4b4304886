"""A real PgBouncer in transaction pooling mode, started for one test on a free local port.

It points at the test server (``PG_URL``'s host, port and database) and trusts the local user,
like the server itself. Not installed is a failure, never a skip: ``.ci/run`` installs Debian's
``pgbouncer`` package, and a suite that silently stopped testing the pooler would look green.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from .conftest import PG_URL
from .helpers import free_port

CONFIG = """\
[databases]
{db} = host={host} port={port} dbname={db}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {dir}/users.txt
pool_mode = transaction
default_pool_size = 10
max_client_conn = 500
logfile = {dir}/pgbouncer.log
pidfile = {dir}/pgbouncer.pid
"""


def _binary() -> str:
    found = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/sbin")
    if found is None:
        pytest.fail(
            "pgbouncer is not installed: `apt-get install pgbouncer` (Debian's package; "
            "CI's .ci/run installs it). The PgBouncer tests need a real one."
        )
    return found


def _write_config(directory: Path, port: int) -> Path:
    server = urlsplit(PG_URL)
    user = server.username or "postgres"
    db = server.path.lstrip("/") or user
    (directory / "users.txt").write_text(f'"{user}" ""\n')
    config = directory / "pgbouncer.ini"
    config.write_text(
        CONFIG.format(
            db=db,
            host=server.hostname or "127.0.0.1",
            port=server.port or 5432,
            listen=port,
            dir=directory,
        )
    )
    if os.geteuid() == 0:  # pgbouncer refuses to run as root; it runs as postgres instead
        directory.chmod(0o777)
    return config


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is not None:
            pytest.fail(f"pgbouncer exited with {proc.returncode}: {_tail(log)}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"pgbouncer never listened on {port}: {_tail(log)}")
            time.sleep(0.05)


def _tail(log: Path) -> str:
    return log.read_text()[-2000:] if log.exists() else "(no log)"


@contextmanager
def pgbouncer() -> Iterator[str]:
    """Run PgBouncer until the block ends; yields its URL (PG_URL's user and database)."""
    binary = _binary()
    directory = Path(tempfile.mkdtemp(prefix="skiplock-pgbouncer-"))
    port = free_port()
    config = _write_config(directory, port)
    user = ["-u", "postgres"] if os.geteuid() == 0 else []
    proc = subprocess.Popen(
        [binary, *user, str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _wait_listening(port, proc, directory / "pgbouncer.log")
        server = urlsplit(PG_URL)
        yield server._replace(netloc=f"{server.username or 'postgres'}@127.0.0.1:{port}").geturl()
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(directory, ignore_errors=True)
