"""Job-control outcomes: verbs a task raises to steer its own job, not errors.

They subclass ``Exception`` only so that ``raise`` works; the executor recognises them
before it treats anything as a failure.
"""

from __future__ import annotations


class JobControl(Exception):
    """Base of the outcomes a task may raise to steer its own job."""


class Retry(JobControl):
    """Fail this attempt and run again after ``in_s`` seconds (spends an attempt).

    When the attempts are spent the job is dead, as with any other failure.
    """

    def __init__(self, in_s: float = 0.0, reason: str = "retry requested") -> None:
        if in_s < 0:
            raise ValueError(f"Retry(in_s={in_s!r}): in_s must be >= 0")
        super().__init__(reason)
        self.in_s = float(in_s)
        self.reason = reason


class Snooze(JobControl):
    """Put the job back to run after ``in_s`` seconds without spending an attempt."""

    def __init__(self, in_s: float) -> None:
        if in_s < 0:
            raise ValueError(f"Snooze(in_s={in_s!r}): in_s must be >= 0")
        super().__init__(f"snoozed for {in_s}s")
        self.in_s = float(in_s)


class Cancel(JobControl):
    """End the job now as ``cancelled``; it is never retried."""

    def __init__(self, reason: str = "cancelled by the task") -> None:
        super().__init__(reason)
        self.reason = reason
