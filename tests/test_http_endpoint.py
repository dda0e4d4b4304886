"""The worker's metrics/health endpoint (issue 20 defect 11, issue 22 item 11): it listens on
loopback by default and serves at most MAX_CONNECTIONS at once, with real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import json

import skiplock
from skiplock import Worker, WorkerConfig
from skiplock._observe.http import MAX_CONNECTIONS, HttpEndpoint, Response

from .helpers import free_port


async def livez() -> Response:
    return 200, "application/json", b'{"alive": true}'


async def get(port: int, path: str = "/livez") -> bytes:
    """The whole reply to one request; b"" if the server closed or reset the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 30)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def test_the_endpoint_listens_on_loopback_by_default() -> None:
    assert WorkerConfig().http_host == "127.0.0.1"


async def test_a_workers_health_port_is_bound_to_loopback(app: skiplock.App) -> None:
    port = free_port()
    worker = Worker(app, health_port=port)
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.ready.wait(), 30)
        (endpoint,) = [s for s in worker._services if isinstance(s, HttpEndpoint)]
        assert endpoint.host == "127.0.0.1"
        reply = await get(port)
        assert reply.startswith(b"HTTP/1.1 200") and json.loads(reply.split(b"\r\n\r\n")[1])
    finally:
        worker.request_stop()
        await asyncio.wait_for(running, 30)


async def test_connections_past_the_bound_are_closed_unanswered() -> None:
    endpoint = HttpEndpoint("health_port", "127.0.0.1", 0, {"/livez": livez})
    async with asyncio.TaskGroup() as tg:
        await endpoint.start(tg)
        idle = [
            await asyncio.open_connection("127.0.0.1", endpoint.port)
            for _ in range(MAX_CONNECTIONS)
        ]
        try:
            # connections are accepted, and their handlers run, in the order they connected:
            # the idle ones hold every slot when the next one arrives
            assert await get(endpoint.port) == b""  # a whole request, closed unanswered
            assert endpoint.refused == 1
        finally:
            for _, writer in idle:
                writer.close()
        await _until(lambda: endpoint.open == 0)
        assert (await get(endpoint.port)).startswith(b"HTTP/1.1 200")  # served again
        endpoint.stop()


async def _until(condition: object) -> None:
    async with asyncio.timeout(30):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.01)
