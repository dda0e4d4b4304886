"""The claim window: how many jobs a worker holds claimed beyond its free slots (prefetch).

Pure arithmetic over observations (no asyncio, no I/O), so it is tested as a table
(tests/test_claim_window.py). The ledger feeds it each job's duration; the producer feeds it
each claim's round trip and asks it how deep to claim. ``WorkerConfig.prefetch`` fixes the
depth; by default it adapts, by Little's law: the jobs the slots would start during
``PREFETCH_COVER`` claim round trips at the mean job duration seen so far, so the runner never
waits for a claim. It holds none before the first job finished and none while jobs are long:
a long job is better left in the table for an idle worker (docs/design.md, "Workers claim
ahead while jobs are short").
"""

from __future__ import annotations

import math

PREFETCH_SHORT_JOB_S = 1.0
"""Claim ahead (by default) only while jobs take less than this on average; once every slot
has been busy this long, jobs claimed ahead are given back for idle workers elsewhere."""
PREFETCH_CEILING = 1000
"""The most jobs the adaptive window holds claimed ahead (each one leased and heartbeated)."""
PREFETCH_COVER = 2.0
"""How many claim round trips the adaptive window covers: the one in flight, and one spare
for a slow one (a completer flush sharing the database, a checkpoint)."""
SHORTEST_JOB_S = 1e-5
"""Mean durations below this count as this (a no-op job), so the window stays finite."""
JOB_WEIGHT = 0.1
"""The weight of the newest job's duration in the mean (an exponential moving average)."""
CLAIM_WEIGHT = 0.2
"""The weight of the newest claim's round trip in its mean."""


class ClaimWindow:
    """The prefetch depth from moving averages of job durations and claim round trips."""

    __slots__ = ("claim_s", "concurrency", "mean_duration", "prefetch")

    def __init__(self, concurrency: int, prefetch: int | None = None) -> None:
        self.concurrency = concurrency
        self.prefetch = prefetch
        """``WorkerConfig.prefetch``: a fixed depth, or None to adapt."""
        self.mean_duration: float | None = None
        """The moving average of a job's duration (None before the first one finished)."""
        self.claim_s: float | None = None
        """The moving average of one claim's round trip (the W in Little's law)."""

    def job_took(self, seconds: float) -> None:
        """A job ran to its end in ``seconds`` (a cancelled one says nothing of its length)."""
        mean = self.mean_duration
        self.mean_duration = seconds if mean is None else mean + JOB_WEIGHT * (seconds - mean)

    def claim_took(self, seconds: float) -> None:
        """One claim's round trip took ``seconds``."""
        mean = self.claim_s
        self.claim_s = seconds if mean is None else mean + CLAIM_WEIGHT * (seconds - mean)

    def depth(self, busy_for: float) -> int:
        """How many jobs to hold claimed beyond the free slots.

        ``busy_for``: how long every slot has been busy (0 while one is free). At least
        ``concurrency`` once adapting, at most ``PREFETCH_CEILING`` (or ``concurrency`` if
        that is larger); 0 before a job and a claim were measured, while jobs are long on
        average, and once every slot has been busy longer than a short job takes."""
        if self.prefetch is not None:
            return self.prefetch
        mean, claim_s = self.mean_duration, self.claim_s
        if mean is None or claim_s is None or mean > PREFETCH_SHORT_JOB_S:
            return 0
        if busy_for >= PREFETCH_SHORT_JOB_S:  # turning long: hold none
            return 0
        concurrency = self.concurrency
        little = math.ceil(concurrency / max(mean, SHORTEST_JOB_S) * claim_s * PREFETCH_COVER)
        # Never below the concurrency: slots free in bursts (a batch started together ends
        # together), which an average rate does not see (W3 lost ~3 ms without this floor).
        return min(max(concurrency, little), max(PREFETCH_CEILING, concurrency))

    def keep_ahead(self) -> int | None:
        """The most jobs worth holding claimed ahead now: those the slots would start within
        a short job's time (``PREFETCH_SHORT_JOB_S``) at the mean duration seen. None: no
        bound (a fixed prefetch, or no job measured yet).

        The window is sized when a claim is made; jobs that turn out slower than the ones
        before them (a worker that ran no-ops claims a backlog of 50 ms jobs) would wait
        here while another worker idles, and the slots, freeing one at a time, never look
        "all busy for a second". Past this bound the producer gives the excess back."""
        if self.prefetch is not None or self.mean_duration is None:
            return None
        mean = max(self.mean_duration, SHORTEST_JOB_S)
        return math.floor(self.concurrency * PREFETCH_SHORT_JOB_S / mean)

    def gives_back(self, busy_for: float) -> bool:
        """True when jobs held ahead should go back to the table: the window adapts and
        every slot has run one job for longer than a short job takes (they would wait that
        long here while an idle worker elsewhere could run them)."""
        return self.prefetch is None and busy_for >= PREFETCH_SHORT_JOB_S
