"""PostgreSQL through asyncpg: the face of the dialect's package (``skiplock._backends.postgres``
names ``PostgresBackend`` for the registry). The rooms: ``backend`` the class, ``connection``
its pools and sessions, ``statements`` the typed statement registry, ``migrate``, ``enqueue``,
``claim``, ``keys``, ``unique``, ``completion``, ``workflow``, ``storage/`` (partitions,
rotation, holders, reads), ``observe``, ``wake``, ``errors``, ``url``, ``rows``, ``inspect``."""

from .backend import PostgresBackend

__all__ = ["PostgresBackend"]
