"""Which backend a database URL names: one line per URL scheme.

Implementations are imported only when a URL names them, so an SQLite app never imports
asyncpg, and ``protocol.py`` (with ``params.py``) imports no implementation. Adding a backend
is one module, one line here and one entry in the conformance suite's ``db_url`` fixture.
"""

from __future__ import annotations

import importlib
from urllib.parse import urlsplit

from .._url import mask_url
from ..errors import ConfigurationError
from .protocol import Backend, Clock

BACKENDS: dict[str, str] = {
    "sqlite": "skiplock._backends.sqlite:SQLiteBackend",
    "postgresql": "skiplock._backends.postgres:PostgresBackend",
    "postgres": "skiplock._backends.postgres:PostgresBackend",
}
"""URL scheme -> ``module:class`` of the backend that serves it."""


def open_backend(url: str, *, clock: Clock | None = None, pool_size: int | None = None) -> Backend:
    """Build (not yet open) the backend a URL names; the backend parses the rest of it.
    ``pool_size``: PostgreSQL's main pool (None: its default; an App over several databases
    divides one budget between them)."""
    scheme = urlsplit(url).scheme
    if scheme not in BACKENDS:
        raise ConfigurationError(
            f"url={mask_url(url)!r}: unsupported scheme {scheme!r}; use sqlite:///PATH or "
            "postgresql://..."
        )
    module, name = BACKENDS[scheme].split(":")
    options: dict[str, object] = {"clock": clock}
    if pool_size is not None and scheme.startswith("postgres"):
        options["pool_size"] = pool_size
    backend: Backend = getattr(importlib.import_module(module), name)(url, **options)
    return backend
