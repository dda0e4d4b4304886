"""Batches: the jobs enqueued in a block, and callbacks that run once when the last finishes.

``async with app.batch(on_success=report.s(), on_complete=cleanup.s()) as batch:`` opens a
batch in the database (its callbacks written ``waiting``, behind the batch's open gate); every
job enqueued inside the block joins it (a context variable, so it follows the block's task and
the calls it makes, nothing else); the block's end closes it. A callback becomes pending once
the batch is closed and every member has finished (``on_success``: every member succeeded; a
member that dies or is cancelled cancels it): exactly once, because that is one conditional
change of its row, whichever worker finishes the last member, and the sweep finishes it if a
worker dies in between. Its first argument is the batch's id (``app.batch_info(id)``).

A block that raises aborts the batch, as a failed transaction leaves nothing behind: what it
added is not the batch the code meant, so neither callback runs over it, and its members that
have not started are cancelled (those already running finish: a job that started cannot be
taken back). The exception goes on to the caller.

A batch lives in one database (its members, its callbacks and its gate are that database's
rows): with several databases (issue 46), the one its callbacks' lanes are in, and its members
must go there too.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Protocol, TypeVar

from ._workflow import Signature
from ._workflow_records import BatchInfo

T = TypeVar("T")


log = logging.getLogger("skiplock")


class BatchApp(Protocol):
    """What a batch calls on its app (``App`` is one)."""

    async def open_batch(
        self,
        on_success: Signature | None = None,
        on_complete: Signature | None = None,
        *,
        database: str | None = None,
    ) -> int: ...

    async def close_batch(self, batch_id: int, *, database: str = ...) -> bool: ...

    async def abort_batch(
        self, batch_id: int, reason: BaseException, *, database: str = ...
    ) -> bool: ...

    async def batch_info(self, batch_id: int, *, database: str = ...) -> BatchInfo: ...

    def batch_database(
        self, on_success: Signature | None, on_complete: Signature | None, database: str | None
    ) -> str: ...

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T: ...


_current: contextvars.ContextVar[tuple[int, str] | None] = contextvars.ContextVar(
    "skiplock_batch", default=None
)


def joined_batch() -> tuple[int, str] | None:
    """The batch the calling code enqueues into, with the database it lives in, or None."""
    return _current.get()


class Batch:
    """An open batch while its block runs (``app.batch(...)``)."""

    def __init__(
        self,
        app: BatchApp,
        on_success: Signature | None,
        on_complete: Signature | None,
        batch_id: int | None,
        close: bool,
        database: str | None = None,
    ) -> None:
        self.app = app
        self.on_success, self.on_complete = on_success, on_complete
        self._id = batch_id
        self.database = app.batch_database(on_success, on_complete, database)
        """The database the batch lives in (its callbacks' lanes', or the one named)."""
        self.close = close
        """Whether the block's end closes the batch (False: more may join later). A block
        that raises aborts it either way."""
        self._token: contextvars.Token[tuple[int, str] | None] | None = None

    @property
    def id(self) -> int:
        if self._id is None:
            raise RuntimeError("the batch is opened when its `async with` block starts")
        return self._id

    async def open(self) -> Batch:
        """Write the batch and its callbacks (what entering the block does)."""
        if self._id is None:
            self._id = await self.app.open_batch(
                self.on_success, self.on_complete, database=self.database
            )
        return self

    async def __aenter__(self) -> Batch:
        await self.open()
        self._token = _current.set((self.id, self.database))
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        closes = self._leave()
        if exc is not None:
            await self._abort(exc)
        elif closes:
            await self.app.close_batch(self.id, database=self.database)

    async def _abort(self, exc: BaseException) -> None:
        """The block raised: abort the batch. If even that fails (the database is away), the
        batch stays open, so its callbacks still never run; the block's own error goes on."""
        try:
            await self.app.abort_batch(self.id, exc, database=self.database)
        except Exception as failed:
            log.warning(
                "batch %d: its block raised %s, and aborting it failed (%s): it stays open, "
                "so its callbacks do not run; its members that have not started will",
                self.id,
                type(exc).__name__,
                failed,
            )

    def __enter__(self) -> Batch:
        if self._id is None:
            self._id = self.app._run_sync(
                self.app.open_batch(self.on_success, self.on_complete, database=self.database)
            )
        self._token = _current.set((self.id, self.database))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        closes = self._leave()
        if exc is not None:
            self.app._run_sync(self._abort(exc))
        elif closes:
            self.app._run_sync(self.app.close_batch(self.id, database=self.database))

    def _leave(self) -> bool:
        """Stop collecting the block's enqueues; whether the batch closes now."""
        if self._token is not None:
            _current.reset(self._token)
            self._token = None
        return self.close

    async def info(self) -> BatchInfo:
        """The batch's members per state, now."""
        return await self.app.batch_info(self.id, database=self.database)
