"""PostgreSQL's storage: the live generations' names, bounds and DDL (``generations``), the job
table's history partitions (``partitions``), the rotation of the live generations
(``rotation``), what holds a detached table (``holders``), the segments the claims name
(``sight``), a person's reads off the live segments (``reads``), and the backend's storage
operations (``operations``).

Their fixed statements are whole text in ``storage/queries/*.sql`` (``-- name: NAME``), read
once into ``QUERIES``; each module names the ones it runs."""

from ...sql_files import load_statements

QUERIES: dict[str, str] = load_statements("skiplock._backends.postgres.storage")
"""The storage's named statements, ``{s}`` (where one names the schema) still in them."""
