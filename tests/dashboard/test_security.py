"""The dashboard against a hostile network: the real ``skiplock dashboard`` command on a real
socket, spoken to byte for byte (a raw socket writes the Host and X-Forwarded-For headers a
browser or httpx would never send)."""

from __future__ import annotations

import base64
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from skiplock._cli import main

from ..helpers import free_port
from .conftest import APP, Stack, wait_until


def raw(port: int, path: str, headers: dict[str, str], method: str = "GET") -> tuple[int, str]:
    """One HTTP/1.1 request with exactly these headers; the status and the whole answer."""
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
    lines += ["Connection: close", "Content-Length: 0", "", ""]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall("\r\n".join(lines).encode("latin-1"))
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks).decode("utf-8", errors="replace")
    return int(answer.split(" ", 2)[1]), answer


def basic(name: str) -> str:
    return "Basic " + base64.b64encode(f"{name}:{name[::-1]}".encode()).decode()


class Server:
    """A ``skiplock dashboard`` process with the given options, on a migrated SQLite file."""

    def __init__(self, stack: Stack, name: str, *options: str, **env: str) -> None:
        self.stack, self.name = stack, name
        self.port = free_port()
        saved = stack.env
        stack.env = {**saved, **env}
        try:
            self.proc = stack.start(name, "dashboard", APP, "--port", str(self.port), *options)
        finally:
            stack.env = saved
        wait_until(self._up, f"the {name} dashboard to listen")

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(self.stack.output(self.name))
        url = f"http://127.0.0.1:{self.port}/static/dashboard.css"
        try:
            with urllib.request.urlopen(url, timeout=1):
                return True
        except (urllib.error.URLError, OSError):
            return False

    def get(self, path: str, **headers: str) -> tuple[int, str]:
        return raw(self.port, path, {"Host": f"127.0.0.1:{self.port}", **headers})

    def log(self) -> str:
        return self.stack.output(self.name)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("dash-security")
    the_stack = Stack(f"sqlite:///{tmp / 'jobs.db'}", tmp)
    the_stack.run(the_stack.app.migrate())
    try:
        yield the_stack
    finally:
        the_stack.stop()


@pytest.fixture(scope="module")
def signed(stack: Stack) -> Server:
    """HTTP basic with the three users (any Host: the Host allow-list is tested apart)."""
    users = stack.users_file()
    return Server(stack, "signed", "--users", str(users), "--allowed-host", "*")


def test_a_host_header_cannot_make_a_page_look_like_a_static_file(signed: Server) -> None:
    # starlette before 1.0.1 rebuilt request.url.path from this Host as "/static/": the guard
    # skipped sign-in and the page ran its queries (and failed on the missing user: a 500)
    status, answer = raw(signed.port, "/jobs", {"Host": "a/static/?x="})
    assert status == 401, answer
    assert "Sign in" in answer
    status, _ = raw(signed.port, "/jobs", {"Host": "a/static/?x=", "Authorization": basic("vera")})
    assert status == 200
    status, answer = raw(signed.port, "/static/dashboard.css", {"Host": "a/static/?x="})
    assert status == 200 and "max-age" in answer


SECRET = "proxy-secret-0123456789"


@pytest.fixture(scope="module")
def proxied(stack: Stack) -> Server:
    """Proxy sign-in from 127.0.0.1 with the shared secret; the default Host allow-list
    plus dash.example."""
    return Server(
        stack,
        "proxied",
        *("--proxy-header", "X-User", "--proxy-role-header", "X-Role"),
        *("--allowed-host", "dash.example"),
        SKIPLOCK_DASHBOARD_PROXY_SECRET=SECRET,
    )


def test_a_spoofed_forwarded_for_does_not_sign_in(stack: Stack) -> None:
    # the proxy is believed only from 10.9.8.7; the client is 127.0.0.1 and says otherwise
    server = Server(
        stack,
        "far-proxy",
        *("--proxy-header", "X-User", "--proxy-role-header", "X-Role"),
        *("--proxy-trusted", "10.9.8.7"),
        SKIPLOCK_DASHBOARD_PROXY_SECRET=SECRET,
    )
    spoof = {"X-Forwarded-For": "10.9.8.7", "X-User": "mallory", "X-Role": "admin"}
    status, answer = server.get("/", **spoof, **{"X-Skiplock-Proxy-Secret": SECRET})
    assert status == 401, answer
    assert ">admin<" not in answer


def test_proxy_sign_in_needs_the_shared_secret(proxied: Server) -> None:
    who = {"X-User": "boss", "X-Role": "admin"}
    assert proxied.get("/", **who)[0] == 401
    assert proxied.get("/", **who, **{"X-Skiplock-Proxy-Secret": SECRET[:-1] + "?"})[0] == 401
    status, page = proxied.get("/", **who, **{"X-Skiplock-Proxy-Secret": SECRET})
    assert status == 200 and ">admin<" in page


def test_a_host_not_allowed_gets_400(proxied: Server) -> None:
    signed_in = {"X-User": "boss", "X-Skiplock-Proxy-Secret": SECRET}
    for host in ("evil.example", f"evil.example:{proxied.port}", "127.0.0.1.evil.example"):
        status, answer = raw(proxied.port, "/", {"Host": host, **signed_in})
        assert status == 400, (host, answer)
    for host in (f"localhost:{proxied.port}", "127.0.0.1", f"[::1]:{proxied.port}", "DASH.example"):
        assert raw(proxied.port, "/", {"Host": host, **signed_in})[0] == 200, host


def test_the_proxy_options_are_checked() -> None:
    runner = CliRunner(env={"SKIPLOCK_DASHBOARD_PROXY_SECRET": ""})
    for options, message in (
        (["--proxy-header", "X-User"], "Error: --proxy-header needs --proxy-secret"),
        (["--proxy-header", "X-User", "--proxy-secret", "short"], "at least 16 characters"),
        (["--proxy-secret", SECRET], "Error: --proxy-secret: only with --proxy-header"),
        (["--forwarded-allow-ips", "10.0.0.1"], "only with --proxy-headers"),
        (["--allowed-host", "dash.example:8080"], "without the port"),
    ):
        result = runner.invoke(main, ["dashboard", "tests.apps.dash_app:app", *options])
        assert result.exit_code == 2, (options, result.output)
        assert message in result.output.strip().splitlines()[-1], result.output
