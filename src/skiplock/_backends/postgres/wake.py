"""PostgreSQL's wake: LISTEN on the queue and completion channels, on a connection of its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from ...errors import ConfigurationError
from .completion import Outcomes
from .errors import wrapped as _wrapped


class Wake(Outcomes):
    """LISTEN/NOTIFY: the wake of new jobs and of finished ones."""

    @asynccontextmanager
    async def listen(self, on_wake: Callable[[str], None]) -> AsyncIterator[asyncio.Event]:
        """LISTEN on a dedicated connection; the yielded event is set if it is lost."""

        def notified(_conn: Any, pid: int, _channel: str, payload: object) -> None:
            if self._notified(pid, str(payload)):
                on_wake(str(payload))

        self._wakers.append(on_wake)
        try:
            async with self._listening(self.channel, notified) as lost:
                yield lost
        finally:
            self._wakers.remove(on_wake)

    @asynccontextmanager
    async def listen_done(
        self, on_done: Callable[[list[int] | None], None]
    ) -> AsyncIterator[asyncio.Event]:
        """LISTEN on the completion channel: each notification names the ids it finished."""

        def notified(_conn: Any, _pid: int, _channel: str, payload: object) -> None:
            try:
                on_done([int(i) for i in str(payload).split(",")])
            except ValueError:
                on_done(None)  # not ours to parse: check every waiter

        async with self._listening(self.done_channel, notified) as lost:
            yield lost

    @asynccontextmanager
    async def _listening(
        self, channel: str, notified: Callable[..., None]
    ) -> AsyncIterator[asyncio.Event]:
        lost = asyncio.Event()
        if self._listen_dsn is None:
            raise ConfigurationError(
                "url: LISTEN needs a direct connection behind pooler=transaction: add "
                "listen_url=postgresql://... (or run poll-only)"
            )
        with _wrapped("listen"), self._connecting():
            conn = await asyncpg.connect(
                self._listen_dsn,
                server_settings=self._settings,
                timeout=self.connect_timeout_s,
                **self._driver,
            )
        conn.add_termination_listener(lambda _c: lost.set())
        try:
            with _wrapped("listen"):
                await conn.add_listener(channel, notified)
            yield lost
        finally:
            if not conn.is_closed():
                try:
                    await asyncio.wait_for(conn.close(), timeout=5)
                except (TimeoutError, Exception):
                    conn.terminate()
