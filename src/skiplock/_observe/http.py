"""A worker's small HTTP endpoint: ``/metrics`` for Prometheus, ``/livez`` and ``/readyz`` for
Kubernetes probes. A few routes, GET only, one request per connection, on the worker's own
event loop (a worker whose loop is stuck or stopped answers nothing, which is what a liveness
probe should see); no web framework, no thread.

Whoever can reach the port must not be able to fail the probes. It once served at most 32
connections and closed the 33rd unanswered, so 32 idle sockets made Kubernetes restart the pod.
Now a request must arrive within REQUEST_DEADLINE_S, and a new connection past MAX_CONNECTIONS,
or past MAX_PER_PEER from one address, closes the oldest connection still waiting for its
request (the address's own first) and is served: a probe, which sends its request at once, is
answered whoever holds the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from .._service import Service
from ..errors import ConfigurationError

log = logging.getLogger("skiplock.worker")

Response = tuple[int, str, bytes]
"""(status, content type, body)."""
Route = Callable[[], Awaitable[Response]]

REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
REQUEST_DEADLINE_S = 2.0
"""How long a connection may take to send its request line and headers (a probe or a scraper
sends them at once)."""
MAX_HEADER_LINES = 100
MAX_CONNECTIONS = 32
"""Connections served at once; past it the oldest still waiting for its request makes room."""
MAX_PER_PEER = 8
"""Connections one peer address holds at once, past which its own oldest idle one makes room
(a scraper and two probes need three), so one address cannot evict everyone else's."""


class _Connection:
    """One connection being served: who it is from, since when, and whether its request is in."""

    __slots__ = ("peer", "since", "transport", "waiting")

    def __init__(self, peer: str, transport: asyncio.WriteTransport) -> None:
        self.peer, self.transport = peer, transport
        self.since = time.monotonic()
        self.waiting = True
        """Its request is not read yet (an idle socket, or a slow one): it may be evicted."""


class HttpEndpoint(Service):
    """Serves ``routes`` (path -> handler) on ``host:port`` until stopped."""

    def __init__(self, option: str, host: str, port: int, routes: dict[str, Route]) -> None:
        super().__init__()
        self.name = f"http:{port}"
        self.option = option
        self.host, self.port = host, port
        self.routes = routes
        self._open: list[_Connection] = []
        """Connections being served now, oldest first (at most MAX_CONNECTIONS)."""
        self.refused = 0
        """Connections closed unanswered: past MAX_PER_PEER, or evicted idle."""

    @property
    def open(self) -> int:
        """Connections being served now."""
        return len(self._open)

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
        peer = str((writer.get_extra_info("peername") or ("?",))[0])
        mine = [c for c in self._open if c.peer == peer]
        if len(mine) >= MAX_PER_PEER or len(self._open) >= MAX_CONNECTIONS:
            # the oldest connection still waiting for its request makes room: the peer's own
            # first (a flood from one address evicts itself), else anyone's
            pool = mine if len(mine) >= MAX_PER_PEER else self._open
            idle = next((c for c in pool if c.waiting), None)
            if idle is None:  # every one is being answered: they end within moments
                self._refuse(writer.transport, f"{len(pool)} connections being answered")
                return
            self._refuse(idle.transport, "the oldest connection waiting for its request")
        connection = _Connection(peer, writer.transport)
        self._open.append(connection)
        try:
            await self._serve_one(reader, writer, connection)
        finally:
            self._open.remove(connection)

    def _refuse(self, transport: asyncio.WriteTransport, why: str) -> None:
        """Close a connection unanswered (no read, no reply, no lingering close)."""
        self.refused += 1
        if self.refused == 1 or self.refused % 1000 == 0:
            log.warning(
                "%s: closing a connection unanswered (%d so far): %s", self.name, self.refused, why
            )
        transport.abort()

    async def _serve_one(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, connection: _Connection
    ) -> None:
        try:
            async with asyncio.timeout(REQUEST_DEADLINE_S):
                method, path = await _request(reader)
            connection.waiting = False
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
