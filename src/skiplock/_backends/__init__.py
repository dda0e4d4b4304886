"""Storage: the only code in skiplock that speaks SQL."""

from .base import Backend
from .registry import open_backend

__all__ = ["Backend", "open_backend"]
