"""The worker's word on a hold of the storage's upkeep (issue 44): one warning per holder,
one info line when the hold ends, and the meter's ``skiplock_storage_held_*`` gauges.

The services that meet a hold (the vacuumer's rotation and vacuum on PostgreSQL, the
checkpointer on SQLite) tell a ``HoldLog`` each look that finds their work held, with who
holds it if they could find out, and each look that finds it free. A hold that lasts an hour
logs one line, not one a look; a new holder (the first one ended, the next was behind it)
logs its own."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from .._backends import Backend
from .._backends.params import HOLD_MIN_S, StorageHoldParams
from .._job import StorageHold, StorageHolder
from .._observe.meter import HoldGauge, Meter
from ..errors import BackendError, BackendUnavailable

log = logging.getLogger("skiplock.worker")


class HoldLog:
    """One kind of hold's lines and gauge (``kind``: ``lock``, ``horizon`` or ``wal``)."""

    def __init__(
        self, kind: str, meter: Meter, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.kind = kind
        self.gauge: HoldGauge = meter.hold(kind)
        self.clock = clock
        self.named: tuple[object, ...] | None = None
        """The holder the last warning named (None: none named yet)."""
        self.holder: StorageHolder | None = None
        self.warned = False
        """A warning went out for the hold now running (its end will be said)."""

    def held_s(self) -> float:
        return self.gauge.held_s(self.clock())

    def held(
        self,
        since: float,
        found: StorageHold | None,
        say: Callable[[StorageHolder, StorageHold], str] | None,
        unnamed: str | None,
        *,
        dead_versions: int | None = None,
        wal_bytes: int | None = None,
    ) -> None:
        """The hold goes on, as it has since ``since`` (``clock()``'s), ``found`` holding it
        (None: nobody could be named). Warns with ``say(holder, found)`` for a holder not
        named yet, or with ``unnamed`` (None: not at all) once if none was ever found (a
        hold whose holders cannot be named, SQLite's, passes no ``say``)."""
        self.gauge.since = since
        self.gauge.dead_versions = dead_versions
        if wal_bytes is not None:
            self.gauge.wal_bytes = wal_bytes
        holder = found.holders[0] if found is not None and found.holders else None
        if holder is not None and found is not None and say is not None:
            if holder.identity != self.named:
                log.warning(say(holder, found))
                self.named, self.holder, self.warned = holder.identity, holder, True
        elif not self.warned and unnamed is not None:
            log.warning(unnamed)
            self.warned = True

    def released(self, say: Callable[[StorageHolder | None, float], str]) -> None:
        """The work went on again: ``say(last holder named, seconds held)`` at info, once,
        if a warning went out for the hold; the gauge back to 0."""
        if self.warned:
            log.info(say(self.holder, self.held_s()))
        self.gauge.since = None
        self.gauge.dead_versions = None
        self.named, self.holder, self.warned = None, None, False


async def find(backend: Backend, kind: str, relations: tuple[str, ...] = ()) -> StorageHold | None:
    """``Backend.storage_hold``, for a service that met a hold: an outage passes through (the
    service reports it); any other failure (a server that refuses a catalog read) names
    nobody, logged at debug, and the service goes on."""
    try:
        return await backend.storage_hold(StorageHoldParams(kind, HOLD_MIN_S, relations))
    except BackendUnavailable:
        raise
    except BackendError as exc:
        log.debug("could not read who holds the storage's %s: %s", kind, exc)
        return None
