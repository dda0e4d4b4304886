"""The worker's metrics/health endpoint (issue 20 defect 11, issue 22 item 11, issue 43 item 4):
it listens on loopback by default, and no one who can reach it can fail a probe by holding
connections open, with real sockets from several loopback addresses."""

from __future__ import annotations

import asyncio
import contextlib
import json

import skiplock
from skiplock import Worker, WorkerConfig
from skiplock._observe.http import MAX_CONNECTIONS, REQUEST_DEADLINE_S, HttpEndpoint, Response

from .helpers import free_port


async def livez() -> Response:
    return 200, "application/json", b'{"alive": true}'


async def get(port: int, path: str = "/livez", source: str = "127.0.0.1") -> bytes:
    """The whole reply to one request from ``source``; b"" if the server closed or reset the
    connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
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


async def idle_sockets(port: int, source: str, count: int) -> list[asyncio.StreamWriter]:
    """``count`` connections from ``source`` that never send a request (each accepted)."""
    writers = []
    for _ in range(count):
        _, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        writers.append(writer)
    return writers


def close(writers: list[asyncio.StreamWriter]) -> None:
    for writer in writers:
        writer.close()


async def test_idle_sockets_from_one_address_never_fail_a_probe(app: skiplock.App) -> None:
    """The attack as it was run: 32 idle sockets made the 33rd connection, the kubelet's
    probe, close unanswered. Here 100 of them, from the probe's own address and another."""
    port = free_port()
    worker = Worker(app, health_port=port)
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.ready.wait(), 30)
        (endpoint,) = [s for s in worker._services if isinstance(s, HttpEndpoint)]
        flood = await idle_sockets(port, "127.0.0.2", 50)
        flood += await idle_sockets(port, "127.0.0.1", 50)
        try:
            for source in ("127.0.0.1", "127.0.0.2", "127.0.0.3"):
                reply = await get(port, source=source)
                assert reply.startswith(b"HTTP/1.1 200"), (source, reply)
            assert endpoint.open <= MAX_CONNECTIONS
        finally:
            close(flood)
    finally:
        worker.request_stop()
        await asyncio.wait_for(running, 30)


async def test_idle_sockets_from_many_addresses_never_fail_a_probe() -> None:
    endpoint = HttpEndpoint("health_port", "127.0.0.1", 0, {"/livez": livez})
    async with asyncio.TaskGroup() as tg:
        await endpoint.start(tg)
        flood = []
        for n in range(MAX_CONNECTIONS + 8):  # one each: the per-address bound never bites
            flood += await idle_sockets(endpoint.port, f"127.0.1.{n + 1}", 1)
        try:
            assert (await get(endpoint.port, source="127.0.0.9")).startswith(b"HTTP/1.1 200")
            assert endpoint.refused >= 9  # the oldest idle ones made room
            assert endpoint.open <= MAX_CONNECTIONS
        finally:
            close(flood)
        endpoint.stop()


async def test_a_connection_that_sends_no_request_is_closed_at_the_deadline() -> None:
    endpoint = HttpEndpoint("health_port", "127.0.0.1", 0, {"/livez": livez})
    async with asyncio.TaskGroup() as tg:
        await endpoint.start(tg)
        reader, writer = await asyncio.open_connection("127.0.0.1", endpoint.port)
        try:
            async with asyncio.timeout(REQUEST_DEADLINE_S * 10):
                assert await reader.read() == b""  # closed by the server, unanswered
        finally:
            writer.close()
        await _until(lambda: endpoint.open == 0)
        endpoint.stop()


async def _until(condition: object) -> None:
    async with asyncio.timeout(30):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.01)
