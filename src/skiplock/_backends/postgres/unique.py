"""PostgreSQL's unique keys: the replacement of a pending duplicate."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..._job import NewJob
from .. import flows
from .connection import Connection


class Unique(Connection):
    """Unique keys: a duplicate's replacement."""

    if TYPE_CHECKING:  # other rooms' operations this one uses

        def _asyncpg_answers(self, conn: Any) -> Callable[[object], Awaitable[Any]]: ...

    async def _replace_one(self, conn: Any, job: NewJob) -> int:
        """One ``replace`` job: its pending holder replaced first (``flows.replace_first``:
        a burst of debounced enqueues costs one statement each), else inserted."""
        return await flows.drive_async(flows.replace_first(job), self._asyncpg_answers(conn))
