"""The claims' rules both dialects follow, written once: a limited queue's rate window and
allowed starts, priority aging's reach, and the keyed claims' turns, cursors and reach.

Nothing here speaks SQL or touches a connection; each dialect's claim statements and flows
(``flows.py``) apply these numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

TURN = "CASE WHEN wt = 0 THEN 0 ELSE (rank - 1) / coalesce(wt, 1) END"
"""The turn a key's job of ``rank`` (1 first) was claimed in by the keyed claims of
PostgreSQL's migrations 13 and 16 and SQLite's 12 and 15, within one claim's batch (their
text stays as applied); since PostgreSQL's 18 and SQLite's 17 the turns are kept in the
database (``TURN_UNITS``)."""

TURN_UNITS = 720_720
"""A key's pass (``skiplock_key_turns``) advances by ``TURN_UNITS / key_weight`` for each job a
claim takes of it; a job's turn is its key's pass at that job divided by ``TURN_UNITS``.
720,720 is the least common multiple of 1 to 16, so the common weights divide it exactly (a
weight that does not takes its turns a rounding's worth faster: under one job in 700)."""


AGING_LEVELS = 16
"""Distinct priorities an aged claim reads from each end of its queue (so at most 32 index
probes, each for at most the claim's batch of rows): JOB_GET_AVAILABLE_AGED's ``$9`` and
``:levels`` (each dialect's ``queries/claim.sql``)."""


def rate_window(rate_per_s: float) -> tuple[int, float]:
    """A rate as (starts, window seconds): ``ceil(rate)`` starts in any ``ceil(rate) / rate``.

    The count is whole and at least one, and the window is chosen so that count / window is
    the rate exactly: 0.5/s is one start in any 2 s, 2.9/s three in any 1.034 s, and a whole
    rate N keeps N in any one second. No window of any length ever holds more than
    ``ceil(rate)`` starts more than the rate allows over it.
    """
    starts = max(1, math.ceil(rate_per_s))
    return starts, starts / rate_per_s


def allowed_starts(
    limit: int,
    max_running: int | None,
    running: int,
    rate_per_s: float | None,
    recent_starts: Sequence[float],
    now: float,
) -> tuple[int, list[float]]:
    """How many jobs a limited queue may start now, and its starts within the rate's window.

    ``max_running`` bounds jobs running at once; ``rate_per_s`` bounds starts in any window
    of ``rate_window`` (a sliding window over the recorded start times, so it is never
    exceeded, and it never lets through more than the window's count: not a token bucket).
    """
    allowed = limit
    if max_running is not None:
        allowed = min(allowed, max_running - running)
    if rate_per_s is None:
        return max(0, allowed), []
    starts, window = rate_window(rate_per_s)
    recent = [t for t in recent_starts if t > now - window]
    return max(0, min(allowed, starts - len(recent))), recent


KeyCursors = dict[tuple[tuple[str, ...] | None, bool, str], tuple[str, str] | None]
"""Where each keyed claim's walk starts next, per queue set, kind (ordinary, or a limited
queue's) and lane, as the claim decided it: one backend's claims of a queue set go round the keys. A
hint, not a guarantee: another process keeps its own, and the turns themselves are in the
database (postgres_key_turns_sql.py); no key's limit or turn depends on it."""

KEY_TURNS_SLICE = 10_000
"""Key turn rows the upkeep reads a call for keys with no live job (a probe each): a million
keys are gone over in a hundred calls, one a prune interval, never all at once."""

KEYS_PER_CLAIM_MIN = 32
KEYS_PER_CLAIM_MAX = 256


def keys_to_visit(limit: int) -> int:
    """How many (queue, key) pairs a keyed claim of ``limit`` jobs visits: twice its limit,
    so keys at their cap or with nothing due leave it room, within [32, 256] (a few probes
    each). Visiting four times the limit, at least 8, measured worse: W12's cold keys started
    later (p50 79 ms against 29-49 on PostgreSQL, 107 against 73 on SQLite) and W14 gained
    nothing (1,047 jobs/s against 1,023-1,145)."""
    return max(KEYS_PER_CLAIM_MIN, min(KEYS_PER_CLAIM_MAX, 2 * limit))
