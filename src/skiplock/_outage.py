"""One view of the database's health, shared by every service of a worker (issue 9).

During an outage each service (producer, notifier, rescuer, pruner, canceller, lease keeper,
scheduler) keeps retrying; if each logged every attempt, a 30 s restart would print dozens
of lines, one pool traceback each, and bury the one fact a person needs. Instead they report
to one ``Outage``: it logs a single line when the database goes away and a single line, with
the measured length, when any service reaches it again. Each attempt is logged at DEBUG.

Recovery also calls ``on_back``: the worker wakes its producer there, so claims resume the
moment any service gets through, not at the end of the producer's own backoff.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

log = logging.getLogger("skiplock.worker")

RETRY_CAP_S = 5.0
"""The longest a background service waits between attempts while the database is away:
short enough that it is back at work seconds after the database is."""


def retry_delay(failures: int, *, first_s: float, cap_s: float = RETRY_CAP_S) -> float:
    """Jittered exponential backoff that never exceeds ``cap_s`` nor overflows: uniform in
    the upper half of ``min(cap_s, first_s * 2**(failures-1))``, so retries of many workers
    spread out but none waits needlessly long."""
    ceiling = min(cap_s, first_s * 2.0 ** min(max(failures - 1, 0), 64))
    return random.uniform(ceiling / 2, ceiling)


class Outage:
    """Whether the database answers, as the services saw it; logs only the changes."""

    def __init__(
        self,
        on_back: Callable[[], None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger = log,
    ) -> None:
        self.on_back = on_back
        self._clock = clock
        self._log = logger
        self._since: float | None = None

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, who: str, exc: Exception) -> None:
        """A service could not reach the database; the first such report logs the outage."""
        if self._since is None:
            self._since = self._clock()
            self._log.warning("database unavailable: %s; retrying", exc)
        else:
            self._log.debug("%s: database still unavailable (%s)", who, exc)

    def answered(self) -> None:
        """A service reached the database; ends (and logs the length of) an outage."""
        if self._since is None:
            return
        lasted = self._clock() - self._since
        self._since = None
        self._log.info("database back after %.1f s", lasted)
        if self.on_back is not None:
            self.on_back()
