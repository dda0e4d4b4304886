"""The algorithms both dialects run, written once: the SQL modules only say how to store.

A backend module binds these to its driver; nothing here speaks SQL or touches a connection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._job import NewJob
from ..errors import DuplicateJob


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


def map_inserted(
    jobs: Sequence[NewJob],
    inserted: Sequence[tuple[int, str | None]],
    live: dict[str, int],
) -> list[int]:
    """Input order ids from the rows an insert created (in id order) and the live jobs that
    already held some unique keys; raises DuplicateJob where a job asked for that."""
    plain = iter([job_id for job_id, key in inserted if key is None])
    created = {key: job_id for job_id, key in inserted if key is not None}
    ids: list[int] = []
    for job in jobs:
        if job.unique_key is None:
            ids.append(next(plain))
        elif job.unique_key in created:
            ids.append(created.pop(job.unique_key))
            live[job.unique_key] = ids[-1]  # a later duplicate in this batch maps to it
        else:
            existing = live[job.unique_key]
            if job.on_duplicate == "raise":
                raise DuplicateJob(
                    f"job {existing} already holds unique_key {job.unique_key!r}", existing
                )
            ids.append(existing)
    return ids
