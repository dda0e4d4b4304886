"""Refused requests cannot fill the database, and a stranger's POST costs no parsing.

Each test is the attack as it was run against a live dashboard: every refused POST used to
be stored (about 1 KB a row, with no cap and nothing pruning it), so 2,000 cross-origin POSTs
added 2,000 rows, and one visit of a browser to a page on another site, looping
``fetch(..., {mode: "no-cors"})``, added 19,680; and every POST's form was parsed before its
Origin, CSRF token and role were looked at. (The same through the App, on both databases,
in test_refusals.py: Playwright's sync API here rules out async tests in this module.)
"""

from __future__ import annotations

import contextlib
import http.server
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Stack
from .test_security import Server

FOREIGN_POSTS = 300


@pytest.fixture(scope="module")
def open_dashboard(stack: Stack) -> Server:
    """``skiplock dashboard APP`` in its default mode: no sign-in, everyone a viewer."""
    return Server(stack, "open", "--allowed-host", "*")


@contextlib.contextmanager
def foreign_site(page: str) -> Iterator[str]:
    """Another site (another origin: another port) serving ``page``; its address."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_on_another_site_fills_no_audit_trail(
    browser: Any, stack: Stack, open_dashboard: Server
) -> None:
    target = f"http://127.0.0.1:{open_dashboard.port}/queues/ledger/pause"
    page_html = f"""<!doctype html><title>loading</title><script>
      (async () => {{
        for (let i = 0; i < {FOREIGN_POSTS}; i++) {{
          await fetch("{target}", {{method: "POST", mode: "no-cors",
            headers: {{"Content-Type": "application/x-www-form-urlencoded"}},
            body: "csrf=x&n=" + i}});
        }}
        document.title = "done";
      }})();
    </script>"""
    context = browser.new_context()
    try:
        visit = context.new_page()
        with foreign_site(page_html) as address:
            visit.goto(address)
            visit.wait_for_function("document.title === 'done'", timeout=60_000)
    finally:
        context.close()
    assert stack.run(stack.app.audit_trail(limit=1000)) == []
    log = open_dashboard.log()
    said = re.findall(r"(\d+) refused requests not stored in the audit trail", log)
    assert said and int(said[0]) >= 1, log[-2000:]  # they reached it, and were counted
    queues = {q.name: q for q in stack.run(stack.app.queues())}
    assert "ledger" not in queues or not queues["ledger"].paused


def send_headers_only(port: int, headers: dict[str, str]) -> tuple[int, str]:
    """A POST whose headers promise a 50 MB body that never comes: the answer, if the
    dashboard gives one without reading the body (else the socket times out)."""
    lines = ["POST /queues/ledger/pause HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
    lines += ["Content-Type: application/x-www-form-urlencoded", "Content-Length: 50000000"]
    with socket.create_connection(("127.0.0.1", port), timeout=15) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        answer = b""
        while b"\r\n\r\n" not in answer or not _whole(answer):
            chunk = conn.recv(65536)
            assert chunk, answer
            answer += chunk
    text = answer.decode("utf-8", errors="replace")
    return int(text.split(" ", 2)[1]), text


def _whole(answer: bytes) -> bool:
    """Whether ``answer`` holds its headers and the whole body they announce."""
    head, _, body = answer.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length: (\d+)", head)
    return length is not None and len(body) >= int(length.group(1))


def test_a_strangers_post_is_refused_before_its_body_is_read(open_dashboard: Server) -> None:
    host = {"Host": f"127.0.0.1:{open_dashboard.port}"}
    status, answer = send_headers_only(
        open_dashboard.port, {**host, "Origin": "http://evil.example"}
    )
    assert status == 403 and "came from another site" in answer
    status, answer = send_headers_only(open_dashboard.port, host)  # same site, no sign-in
    assert status == 403 and "needs the operator role" in answer
