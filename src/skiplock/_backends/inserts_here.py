"""What a backend whose ``inserts_here`` is True offers besides the ``Backend`` operations: a
sync enqueue's insert in the calling thread (SQLite's synchronous driver), so
``task.enqueue()`` skips the hop to the app's loop. Apart from ``protocol.py`` so that the
enqueue path names this capability without a dialect."""

from __future__ import annotations

from typing import Protocol, TypeGuard

from .params import JobInsertManyParams
from .protocol import Backend


class InsertsHere(Protocol):
    """What a backend whose ``inserts_here`` is True offers besides the ``Backend``
    operations: a sync enqueue's insert in the calling thread, on a connection it keeps for
    callers' threads."""

    def job_insert_many_here(self, params: JobInsertManyParams) -> list[int]:
        """``job_insert_many`` in the calling thread, in its own write transaction."""
        ...

    def close_here(self) -> None:
        """Close the connection ``job_insert_many_here`` keeps (the next call opens one)."""
        ...


def inserts_here(backend: Backend) -> TypeGuard[InsertsHere]:
    """Whether ``backend`` inserts a sync enqueue in the caller's thread (``inserts_here``)."""
    return backend.inserts_here
