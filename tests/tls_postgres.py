"""A throwaway PostgreSQL 15 cluster that accepts only TLS with a client certificate, for the tests
of TLS options (issue 22 medium 4). Never the shared server on 5432: its own data directory under
a temp dir, its own free port, stopped and removed at the end.

Certificates come from ``openssl`` (Debian's): a CA made for the test, a server certificate for
localhost/127.0.0.1 and a client certificate for user ``postgres`` signed by it, a second client
key encrypted with a passphrase (``sslpassword``), and an unrelated CA a client must refuse.
``pg_hba.conf`` has only ``hostssl ... cert`` lines: a connection without TLS, or without a client
certificate the CA signed, is refused by the server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import free_port

PG_BIN = Path(os.environ.get("SKIPLOCK_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
KEY_PASSPHRASE = "s3cret-pass"


@dataclass(frozen=True)
class TlsCluster:
    port: int
    ca: Path
    """The CA that signed the server's and the client's certificates."""
    other_ca: Path
    """A CA that signed nothing here: verifying the server against it must fail."""
    client_cert: Path
    client_key: Path
    encrypted_key: Path
    """``client_key`` encrypted with ``KEY_PASSPHRASE``."""


def available() -> bool:
    return (PG_BIN / "initdb").exists() and shutil.which("openssl") is not None


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _certificates(d: Path) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=skiplock test CA", "-keyout", "ca.key", "-out", "ca.crt", cwd=d)  # fmt: skip
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=other CA", "-keyout", "other.key", "-out", "other.crt", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name, subject, ext in (("server", "/CN=localhost", ["-extfile", "san.ext"]),
                               ("client", "/CN=postgres", [])):  # fmt: skip
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", *ext, cwd=d)  # fmt: skip
    _openssl("pkcs8", "-topk8", "-in", "client.key", "-out", "client-encrypted.key",
             "-v2", "aes-256-cbc", "-passout", f"pass:{KEY_PASSPHRASE}", cwd=d)  # fmt: skip
    for key in d.glob("*.key"):
        key.chmod(0o600)


def _as_postgres(args: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root; the machine's tests run as root.
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@contextlib.contextmanager
def tls_cluster() -> Iterator[TlsCluster]:
    root = Path(tempfile.mkdtemp(prefix="skiplock-tls-"))
    certs, data = root / "certs", root / "data"
    certs.mkdir()
    _certificates(certs)
    server_dir = root / "server"
    server_dir.mkdir()
    for name in ("server.crt", "server.key", "ca.crt"):
        shutil.copy(certs / name, server_dir / name)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        for path in (server_dir, *server_dir.iterdir()):
            shutil.chown(path, "postgres", "postgres")
    root.chmod(0o755)
    certs.chmod(0o755)
    port = free_port()
    initdb = [str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-N"]
    subprocess.run(_as_postgres(initdb), check=True, capture_output=True)
    with (data / "postgresql.conf").open("a") as conf:
        conf.write(
            f"port = {port}\nlisten_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{root}'\nssl = on\n"
            f"ssl_cert_file = '{server_dir / 'server.crt'}'\n"
            f"ssl_key_file = '{server_dir / 'server.key'}'\n"
            f"ssl_ca_file = '{server_dir / 'ca.crt'}'\nfsync = off\n"
        )
    (data / "pg_hba.conf").write_text("local all all trust\nhostssl all all 127.0.0.1/32 cert\n")
    log = root / "server.log"
    started = subprocess.run(
        _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "start"]),
        capture_output=True,
        text=True,
        check=False,
    )
    if started.returncode:
        text = log.read_text() if log.exists() else started.stderr
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"the TLS test cluster did not start: {text}")
    try:
        yield TlsCluster(
            port=port,
            ca=certs / "ca.crt",
            other_ca=certs / "other.crt",
            client_cert=certs / "client.crt",
            client_key=certs / "client.key",
            encrypted_key=certs / "client-encrypted.key",
        )
    finally:
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)
