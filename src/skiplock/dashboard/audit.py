"""The dashboard's side of the audit trail: what only it sees (refused actions, refused
sign-ins) goes to ``app.record_action``; skiplock's operations record the rest themselves.

A refusal is the one entry a stranger can cause, so refusals are stored under a per-minute
cap (``REFUSALS_STORED_PER_MINUTE``, refused actions and sign-ins together; past it they are
counted in one log line a minute), and never for the anonymous viewer of the default
no-sign-in mode: anyone who can reach the dashboard, or make a browser that can POST to it
from another site, is that viewer, and each stored row costs a write (SQLite's one write lock,
the one claims need). What a person signed in as someone did is kept, and pruned with the
trail (``WorkerConfig.retention_audit_s``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..errors import SkiplockError
from .auth import ANONYMOUS, SlidingWindow, User

if TYPE_CHECKING:
    from .state import Dashboard

log = logging.getLogger("skiplock.dashboard")

MAX_FIELD_CHARS = 1000
"""A client writes the name and the path it sends: kept to this much of each."""

REFUSALS_STORED_PER_MINUTE = 60
"""Refused actions and sign-ins stored in the audit trail a minute, at most (together)."""


async def audit(dash: Dashboard, what: str, who: str, target: str, detail: str = "") -> None:
    """Store in the audit trail; a database that cannot take it is logged, and the answer
    to the person is still given."""
    fit = [v.replace("\x00", "")[:MAX_FIELD_CHARS] or "?" for v in (who, target, detail)]
    try:
        await dash.app.record_action(
            what, who=fit[0], target=fit[1], detail=fit[2] if detail else ""
        )
    except SkiplockError as exc:
        log.error("audit trail not written (%s by %s on %s): %s", what, who, target, exc)


class Refusals:
    """What the dashboard refused in the last minute, and what it did not store of it."""

    def __init__(self) -> None:
        self.stored = SlidingWindow(60.0)
        self.unstored = 0
        """Refusals counted but not stored since the last line that said so."""
        self._said_at = float("-inf")

    def may_store(self, now: float) -> bool:
        """Whether one more refusal fits this minute's cap (then it is counted as stored)."""
        if self.stored.wait("all", REFUSALS_STORED_PER_MINUTE, now):
            return False
        self.stored.add("all", now)
        return True

    def not_stored(self, what: str, now: float) -> None:
        """Count one refusal left out of the trail; say how many, once a minute at most."""
        self.unstored += 1
        if now - self._said_at >= 60.0:
            log.warning(
                "%d refused requests not stored in the audit trail in the last minute "
                "(the anonymous viewer's, or past %d a minute); the latest: %s",
                self.unstored,
                REFUSALS_STORED_PER_MINUTE,
                what,
            )
            self.unstored, self._said_at = 0, now


async def audit_refusal(
    dash: Dashboard, user: User | None, what: str, who: str, target: str, detail: str = ""
) -> None:
    """Store a refusal, under the per-minute cap; never one of someone whose name the
    dashboard does not know (the anonymous viewer; ``user`` is None for a refused sign-in,
    which names who it claims to be)."""
    now = time.monotonic()
    anonymous = user is not None and user.name == ANONYMOUS.name
    if anonymous or not dash.refusals.may_store(now):
        dash.refusals.not_stored(f"{what} by {who[:200]!r} on {target[:200]!r}", now)
        return
    await audit(dash, what, who, target, detail)
