"""A worker's small HTTP endpoint: ``/metrics`` for Prometheus, ``/livez`` and ``/readyz`` for
Kubernetes probes. A few routes, GET only, one request per connection, at most
MAX_CONNECTIONS at once (loopback unless ``http_host`` says otherwise), on the worker's own
event loop (a worker whose loop is stuck or stopped answers nothing, which is what a liveness
probe should see); no web framework, no thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from .._service import Service
from ..errors import ConfigurationError

log = logging.getLogger("skiplock.worker")

Response = tuple[int, str, bytes]
"""(status, content type, body)."""
Route = Callable[[], Awaitable[Response]]

REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
READ_TIMEOUT_S = 5.0
MAX_HEADER_LINES = 100
MAX_CONNECTIONS = 32
"""Connections served at once; one more is closed unanswered as soon as it is accepted. A
scraper and two probes need three: the bound keeps a flood of idle connections (each held
for up to READ_TIMEOUT_S) from costing the worker's loop more than this many."""


class HttpEndpoint(Service):
    """Serves ``routes`` (path -> handler) on ``host:port`` until stopped."""

    def __init__(self, option: str, host: str, port: int, routes: dict[str, Route]) -> None:
        super().__init__()
        self.name = f"http:{port}"
        self.option = option
        self.host, self.port = host, port
        self.routes = routes
        self.open = 0
        """Connections being served now (at most MAX_CONNECTIONS)."""
        self.refused = 0
        """Connections closed unanswered because MAX_CONNECTIONS were open."""

    async def serve(self) -> None:
        try:
            server = await asyncio.start_server(self._handle, self.host, self.port)
        except OSError as exc:
            raise ConfigurationError(
                f"{self.option}={self.port}: cannot listen on {self.host}:{self.port} ({exc})"
            ) from exc
        self.port = server.sockets[0].getsockname()[1]
        log.info("serving %s on http://%s:%d", ", ".join(self.routes), self.host, self.port)
        self.mark_ready()
        async with server:
            await server.serve_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open >= MAX_CONNECTIONS:
            self.refused += 1
            if self.refused == 1 or self.refused % 1000 == 0:
                log.warning(
                    "%s: %d connections open, the most served at once: closing new ones "
                    "unanswered (%d so far)",
                    self.name,
                    self.open,
                    self.refused,
                )
            writer.transport.abort()  # no read, no reply, no lingering close
            return
        self.open += 1
        try:
            await self._serve_one(reader, writer)
        finally:
            self.open -= 1

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                method, path = await _request(reader)
            status, kind, body = await self._answer(method, path)
            head = (
                f"HTTP/1.1 {status} {REASONS.get(status, '')}\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + (b"" if method == "HEAD" else body))
            await writer.drain()
        except (TimeoutError, ValueError, ConnectionError):
            pass  # a client that sends nothing or nonsense gets nothing
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, method: str, path: str) -> Response:
        route = self.routes.get(path.split("?", 1)[0])
        if route is None:
            return 404, "text/plain", b"not found\n"
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"GET only\n"
        return await route()


async def _request(reader: asyncio.StreamReader) -> tuple[str, str]:
    """The request line's method and path; the headers are read and ignored."""
    line = (await reader.readline()).decode("latin-1")
    method, path, _ = line.split(" ", 2)
    for _ in range(MAX_HEADER_LINES):
        if (await reader.readline()) in (b"\r\n", b"\n", b""):
            break
    return method, path
