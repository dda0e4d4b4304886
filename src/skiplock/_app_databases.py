"""``Databases``: how the App's parts reach its databases (issue 46, "one view"): the backend
of one database by name (``await databases()`` is the App's own, as before), the backend of
the database a job id names, and every database in the order their ids run.

The parts get this, never the App: it holds the App's ``backend(database=...)`` getter and
its ``Directory``. A one-database App has one name, ``"default"``: every loop below runs
once, so what it does and prints is what it did before."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from ._backends import Backend
from ._lanes import DEFAULT, ID_SPAN, Directory
from .errors import ConfigurationError

R = TypeVar("R", bound=Any)
"""A job record (``JobRecord``): a dataclass with an ``id`` and a ``database``."""

NamedGetter = Callable[[str], Awaitable[Backend]]
"""The open backend of a database, by its name (``App.backend(database=...)``)."""


class Databases:
    """The App's databases as its parts reach them."""

    def __init__(self, get: NamedGetter, directory: Directory | None = None) -> None:
        self._get = get
        self.directory = directory if directory is not None else Directory()

    @classmethod
    def one(cls, get: Callable[[], Awaitable[Backend]]) -> Databases:
        """One database reached through a plain getter (a worker's own gauges)."""

        async def named(database: str) -> Backend:
            return await get()

        return cls(named)

    async def __call__(self, database: str = DEFAULT) -> Backend:
        """The open backend of ``database`` (the App's own by default)."""
        return await self._get(database)

    async def of_id(self, job_id: int) -> Backend:
        """The open backend of the database ``job_id`` was made in (ConfigurationError: an
        id of a database this App does not name)."""
        return await self._get(self.name_of_id(job_id))

    def name_of_id(self, job_id: int) -> str:
        """The database ``job_id`` names; a one-database App's every id is its own (an id
        past its range is then not found, as it always was)."""
        return self.directory.name_of_id(job_id) if self.several else DEFAULT

    @property
    def several(self) -> bool:
        return self.directory.several

    def names(self) -> tuple[str, ...]:
        """Every database's name, ``"default"`` first."""
        return self.directory.names()

    def chosen(self, database: str | None) -> tuple[str, ...]:
        """The databases an operation acts on, in the order their ids run (ascending
        number): ``database`` alone (checked: an unknown name is a ConfigurationError), or
        every one when None."""
        if database is None:
            return tuple(sorted(self.names(), key=self.directory.number_of))
        if database not in self.names():
            raise ConfigurationError(
                f"database {database!r}: no such database (known: {', '.join(self.names())})"
            )
        return (database,)

    def split(self, ids: Iterable[int]) -> dict[str, tuple[int, ...]]:
        """``ids`` by the database each names, in the order given within each (every id
        checked first: one of no database here fails the whole batch before anything)."""
        parts: dict[str, list[int]] = {}
        for job_id in ids:
            parts.setdefault(self.name_of_id(job_id), []).append(job_id)
        return {name: tuple(part) for name, part in parts.items()}

    def named(self, records: list[R]) -> list[R]:
        """Job records with their ``database`` set (the one each id names), when there are
        several; a one-database App's stay ``"default"``, untouched."""
        if not self.several:
            return records
        return [dataclasses.replace(r, database=self.name_of_id(r.id)) for r in records]

    def first_id(self, database: str) -> int:
        """The smallest id ``database`` makes (its number times ``ID_SPAN``)."""
        return self.directory.number_of(database) * ID_SPAN
