"""Storage: the only code in skiplock that speaks SQL."""

from collections.abc import Awaitable, Callable

from .protocol import Backend
from .registry import open_backend

BackendGetter = Callable[[], Awaitable[Backend]]
"""How a part of the App reaches the open backend of the running loop (``App.backend``)."""

__all__ = ["Backend", "BackendGetter", "open_backend"]
