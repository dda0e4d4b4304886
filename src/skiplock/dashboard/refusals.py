"""What the dashboard refused in the last minute: the per-minute cap on the refusals stored in
the audit trail, and the count of those left out (``audit.audit_refusal`` says why)."""

from __future__ import annotations

import logging

from .auth import SlidingWindow

log = logging.getLogger("skiplock.dashboard")

REFUSALS_STORED_PER_MINUTE = 60
"""Refused actions and sign-ins stored in the audit trail a minute, at most (together)."""


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
