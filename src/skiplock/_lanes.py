"""Lanes: which database a job lives in, by a rule written down once.

Every job carries a lane (a short name, ``"default"`` unless routed). The directory maps each
lane to one named database, and each job to its lane, in this order:

1. the task's own ``lane=`` (``@app.task(lane="eu")``);
2. its queue's route: a lane, or a ``Split`` of lanes for a hot queue, where the job's
   concurrency key (else its unique key) picks the lane by a stable hash, so one tenant's
   jobs stay in one lane (its order, its limit, its unique keys are one database's); a job
   of a split queue with neither key goes to any of its lanes, at random;
3. else the lane ``"default"``, on the database named ``"default"`` (the App's own URL).

Why a directory and not a hash of every queue over every database: where a queue lives must
be a choice (a tenant's flood, an upgrade, a region), stable across processes and releases,
and readable in the configuration. Why a key's hash is the jump consistent hash over a
64-bit BLAKE2b of its UTF-8 (Lamping and Veach, 2014): Python's ``hash`` differs by process,
and when a split grows from n lanes to n + 1 only 1/(n + 1) of the keys move.

A database has a number, 0 for ``"default"``: its job ids start at ``number * ID_SPAN``, so an
id names the database it lives in (``database_of_id``) wherever an id is all a person holds
(``skiplock job show ID``, ``app.job(ID)``).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import ConfigurationError

DEFAULT = "default"
"""The lane every job is in unless routed, and the name of the App's own database."""

ID_SPAN = 10**13
"""Ids per database: database ``n``'s ids are ``n * ID_SPAN`` and up (ten trillion: 30 years
at 10,000 jobs a second). ``MAX_DATABASE_NUMBER * ID_SPAN`` stays under 2**53, so every id is
exact in JavaScript (the dashboard) and in a float."""

MAX_DATABASE_NUMBER = 899
"""The largest database number: its last id, 900 * ID_SPAN - 1, is under 2**53."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\Z")
NAME_RULE = "must be 1 to 63 letters, digits, '_', '.' or '-', starting with a letter or digit"


def check_lane_name(option: str, value: object) -> str:
    """A lane's or a database's name (it appears in ids' owners, metrics labels, the CLI)."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise ConfigurationError(f"{option}={value!r}: {NAME_RULE}")
    return value


@dataclass(frozen=True)
class Database:
    """One PostgreSQL database of the directory: its URL and its number (1 to 899; 0 is the
    App's own). The number is fixed for the database's life: it is where its ids start."""

    url: str
    number: int

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url.startswith(
            ("postgresql://", "postgres://")
        ):
            raise ConfigurationError(
                f"Database.url={self.url!r}: must be a postgresql:// URL (several databases "
                "are PostgreSQL's; SQLite serves one machine)"
            )
        if isinstance(self.number, bool) or not isinstance(self.number, int):
            raise ConfigurationError(f"Database.number={self.number!r}: must be an int")
        if not 1 <= self.number <= MAX_DATABASE_NUMBER:
            raise ConfigurationError(
                f"Database.number={self.number!r}: must be between 1 and "
                f"{MAX_DATABASE_NUMBER} (0 is the App's own database)"
            )


@dataclass(frozen=True)
class Split:
    """A hot queue split over lanes: each job's key picks one of ``lanes`` (in this order; a
    lane added at the end moves 1/n of the keys, the fewest any rule can)."""

    lanes: tuple[str, ...]

    def __init__(self, *lanes: str) -> None:
        if len(lanes) < 2:
            raise ConfigurationError(f"Split{lanes!r}: give at least two lanes")
        for lane in lanes:
            check_lane_name("Split lane", lane)
        if len(set(lanes)) != len(lanes):
            raise ConfigurationError(f"Split{lanes!r}: a lane appears twice")
        object.__setattr__(self, "lanes", tuple(lanes))

    def pick(self, key: str | None) -> str:
        """The lane of a job with ``key`` (None: any lane, at random)."""
        if key is None:
            return random.choice(self.lanes)
        return self.lanes[jump_hash(key_hash(key), len(self.lanes))]


def key_hash(key: str) -> int:
    """A key's 64-bit hash, the same in every process, release and platform."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


def jump_hash(key: int, buckets: int) -> int:
    """Lamping and Veach's jump consistent hash: the bucket of ``key`` among ``buckets``;
    growing ``buckets`` by one moves a key only into the new bucket, 1/buckets of them."""
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) % 2**64
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


def database_of_id(job_id: int) -> int:
    """The number of the database a job id was made in."""
    return job_id // ID_SPAN


@dataclass(frozen=True)
class Directory:
    """The lanes' databases and the jobs' routes, checked once when the App is made.

    ``databases``: name -> Database (the App's own URL is ``"default"``, number 0, and is
    not listed). ``lanes``: lane -> database name (``"default"`` is on ``"default"`` unless
    given). ``routes``: queue -> lane or ``Split``. ``draining``: lane -> the database it is
    moving away from, whose workers keep claiming it there until it is empty.
    """

    databases: Mapping[str, Database] = field(default_factory=dict)
    lanes: Mapping[str, str] = field(default_factory=dict)
    routes: Mapping[str, str | Split] = field(default_factory=dict)
    draining: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        numbers: dict[int, str] = {}
        for name, db in self.databases.items():
            check_lane_name("databases name", name)
            if name == DEFAULT:
                raise ConfigurationError(
                    "databases: 'default' is the App's own database (its URL); name the others"
                )
            if not isinstance(db, Database):
                raise ConfigurationError(
                    f"databases[{name!r}]={db!r}: must be a skiplock.Database(url, number=N)"
                )
            if db.number in numbers:
                raise ConfigurationError(
                    f"databases: {numbers[db.number]!r} and {name!r} both have number "
                    f"{db.number}: each database's ids start at its own number"
                )
            numbers[db.number] = name
        known = {DEFAULT, *self.databases}
        for lane, database in self.lanes.items():
            check_lane_name("lanes name", lane)
            if database not in known:
                raise ConfigurationError(
                    f"lanes[{lane!r}]={database!r}: no such database (known: "
                    f"{', '.join(sorted(known))})"
                )
        for queue, route in self.routes.items():
            routed = route.lanes if isinstance(route, Split) else (route,)
            for lane in routed:
                check_lane_name(f"routes[{queue!r}]", lane)
                self._known_lane(f"routes[{queue!r}]", lane)
        for lane, database in self.draining.items():
            self._known_lane("draining", lane)
            if database not in known:
                raise ConfigurationError(f"draining[{lane!r}]={database!r}: no such database")
            if database == self.database_of(lane):
                raise ConfigurationError(
                    f"draining[{lane!r}]={database!r}: the lane already lives there; name "
                    "the database it is moving away from"
                )

    def _known_lane(self, option: str, lane: str) -> None:
        if lane != DEFAULT and lane not in self.lanes:
            raise ConfigurationError(
                f"{option}: lane {lane!r} is not in lanes= (say which database it is on)"
            )

    @property
    def several(self) -> bool:
        """Whether more than one database is named (one database: every job in its lanes)."""
        return bool(self.databases)

    def check_lane(self, option: str, lane: str) -> str:
        """A lane a task or a call names: known, or a ConfigurationError naming it."""
        check_lane_name(option, lane)
        self._known_lane(option, lane)
        return lane

    def lane_for(
        self,
        queue: str,
        task_lane: str | None = None,
        key: str | None = None,
    ) -> str:
        """The lane of a job of ``queue`` (the rule in this module's docstring): the task's
        own lane, else the queue's route (a Split picks by ``key``), else ``"default"``."""
        if task_lane is not None:
            if task_lane != DEFAULT and task_lane not in self.lanes:
                self._known_lane("lane", task_lane)
            return task_lane
        route = self.routes.get(queue)
        if route is None:
            return DEFAULT
        if isinstance(route, Split):
            return route.pick(key)
        return route

    def database_of(self, lane: str) -> str:
        """The name of the database ``lane`` lives in."""
        return self.lanes.get(lane, DEFAULT)

    def number_of(self, database: str) -> int:
        """A database's number (0: the App's own)."""
        return 0 if database == DEFAULT else self.databases[database].number

    def name_of_id(self, job_id: int) -> str:
        """The name of the database a job id belongs to (ConfigurationError: none here)."""
        number = database_of_id(job_id)
        if number == 0:
            return DEFAULT
        for name, db in self.databases.items():
            if db.number == number:
                return name
        raise ConfigurationError(
            f"job id {job_id}: it was made in database number {number}, which this App's "
            "databases= does not name"
        )

    def lanes_served(self, database: str) -> tuple[str, ...]:
        """The lanes a worker of ``database`` claims: those living there, those draining away
        from it, and ``"default"`` in every database (a job written there unrouted, by an App
        of that one database or by your SQL, is never left unclaimed); a stable order,
        ``"default"`` first."""
        here = {lane for lane in self.lanes if self.database_of(lane) == database}
        here |= {lane for lane, away in self.draining.items() if away == database}
        here.add(DEFAULT)
        return tuple(sorted(here, key=lambda lane: (lane != DEFAULT, lane)))

    def names(self) -> tuple[str, ...]:
        """Every database's name, ``"default"`` first."""
        return (DEFAULT, *sorted(self.databases))
