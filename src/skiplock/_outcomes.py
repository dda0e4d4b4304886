"""Job-control outcomes: verbs a task raises to steer its own job, not errors.

They subclass ``Exception`` only so that ``raise`` works; the executor recognises them
before it treats anything as a failure.
"""

from __future__ import annotations

from ._limits import check_seconds


class JobControl(Exception):
    """Base of the outcomes a task may raise to steer its own job."""


class Retry(JobControl):
    """Fail this attempt and run again after ``in_s`` seconds (spends an attempt).

    ``in_s`` is finite, 0 to 10 years; anything else is a ConfigurationError (a ValueError)
    raised where the task raises, so the job fails with that reason instead of poisoning the
    worker's outcome batch.

    When the attempts are spent the job is dead, as with any other failure.
    """

    def __init__(self, in_s: float = 0.0, reason: str = "retry requested") -> None:
        self.in_s = check_seconds("Retry.in_s", in_s)
        super().__init__(reason)
        self.reason = reason


class Snooze(JobControl):
    """Put the job back to run after ``in_s`` seconds without spending an attempt."""

    def __init__(self, in_s: float) -> None:
        self.in_s = check_seconds("Snooze.in_s", in_s)
        super().__init__(f"snoozed for {in_s}s")


class Cancel(JobControl):
    """End the job now as ``cancelled``; it is never retried."""

    def __init__(self, reason: str = "cancelled by the task") -> None:
        super().__init__(reason)
        self.reason = reason


class Parked(BaseException):
    """Raised by ``job.wait_for`` to end the attempt as parked: the job waits for the signal
    ``name`` for ``timeout_s`` seconds without a lease or a worker slot. A BaseException, so
    a task's own ``except Exception`` cannot swallow it (as with asyncio's CancelledError)."""

    def __init__(self, name: str, timeout_s: float) -> None:
        super().__init__(f"waiting for signal {name!r}")
        self.name = name
        self.timeout_s = timeout_s
