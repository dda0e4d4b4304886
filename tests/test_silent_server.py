"""A PostgreSQL address that accepts TCP and never answers (a hung server, a black-holing
proxy): connecting gives up after a connect timeout with a reason that names the address,
and a stop request or a signal interrupts the wait instead of being ignored until then."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import skiplock
from skiplock._backends.postgres import PostgresBackend
from skiplock._backends.postgres.connection import DEFAULT_CONNECT_TIMEOUT_S

from .helpers import APP, Cli


class SilentServer:
    """Accepts connections on 127.0.0.1 and never sends a byte."""

    def __init__(self) -> None:
        self.accepted = asyncio.Event()
        self.writers: list[asyncio.StreamWriter] = []

    async def _accept(self, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        self.accepted.set()

    def url(self, query: str = "") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/test{query}"

    async def __aenter__(self) -> SilentServer:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_exc: object) -> None:
        for writer in self.writers:
            writer.close()
        self.server.close()
        await self.server.wait_closed()


@pytest.fixture
async def silent() -> AsyncIterator[SilentServer]:
    async with SilentServer() as server:
        yield server


def test_the_default_connect_timeout_is_ten_seconds() -> None:
    backend = PostgresBackend("postgresql://u@db.example:6543/app")
    assert backend.connect_timeout_s == DEFAULT_CONNECT_TIMEOUT_S == 10.0
    custom = PostgresBackend("postgresql://u@db.example/app?connect_timeout=2.5&schema=s")
    assert (custom.connect_timeout_s, custom.schema) == (2.5, "s")
    assert "connect_timeout" not in custom._dsn  # not sent to the server as a setting


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf", "soon", "1e9"])
def test_a_bad_connect_timeout_is_refused_naming_it(bad: str) -> None:
    with pytest.raises(skiplock.ConfigurationError, match="connect_timeout"):
        PostgresBackend(f"postgresql://u@db.example/app?connect_timeout={bad}")


async def test_a_server_that_never_answers_times_out_naming_host_port_and_reason(
    silent: SilentServer,
) -> None:
    app = skiplock.App(silent.url("?connect_timeout=1"))
    try:
        async with asyncio.timeout(8):  # the driver's own default would wait 60 s
            with pytest.raises(skiplock.BackendUnavailable) as raised:
                await app.check_schema()
    finally:
        await app.close()
    message = str(raised.value)
    assert f"127.0.0.1:{silent.port}" in message, message
    assert "timed out after 1 s" in message, message


async def test_a_stop_request_interrupts_a_connect_in_progress(silent: SilentServer) -> None:
    app = skiplock.App(silent.url())  # the 10 s default: a stop must not wait it out
    stopping = asyncio.Event()
    waiting = asyncio.create_task(app.wait_for_database(stopping))
    try:
        await asyncio.wait_for(silent.accepted.wait(), 5)
        stopping.set()
        assert await asyncio.wait_for(waiting, 8) is False  # below the 10 s connect timeout
    finally:
        waiting.cancel()
        await app.close()


@pytest.mark.slow
async def test_sigint_stops_a_cli_worker_still_connecting(
    silent: SilentServer, tmp_path: Path
) -> None:
    cli = Cli(silent.url(), tmp_path)
    output = tmp_path / "worker.out"
    with output.open("wb") as out:
        proc = await asyncio.to_thread(
            subprocess.Popen,
            [sys.executable, "-m", "skiplock", "worker", APP],
            env=cli.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        await asyncio.wait_for(silent.accepted.wait(), 30)
        proc.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(asyncio.to_thread(proc.wait), 5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, output.read_text()
