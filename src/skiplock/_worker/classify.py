"""Turn how an attempt ended into what happens to its row: a pure function, table-tested.

``Decision`` and ``error_record`` live in ``_attempt`` (below the worker: eager mode and the
tracing seam use them too) and are re-exported here."""

from __future__ import annotations

import random

from .._attempt import MAX_MESSAGE_CHARS, Decision, error_record
from .._config import RetryPolicy
from .._job import Disposition
from .._outcomes import Cancel, Parked, Retry, Snooze

__all__ = [
    "MAX_MESSAGE_CHARS",
    "Decision",
    "JobTimeout",
    "NewerPayload",
    "UnrunnableJob",
    "UnstorableResult",
    "classify",
    "error_record",
]


class JobTimeout(Exception):
    """The attempt ran past its task's timeout."""


class UnrunnableJob(Exception):
    """The job cannot run at all here (unknown task, corrupt payload): it goes to dead."""


class NewerPayload(Exception):
    """The job's payload is a version newer than this worker's task knows (a rolled-back
    deploy): it is put back for ``in_s`` seconds, its attempt given back, the reason kept."""

    def __init__(self, message: str, in_s: float) -> None:
        super().__init__(message)
        self.in_s = in_s


class UnstorableResult(UnrunnableJob):
    """The task returned a value that cannot be stored (not strict JSON, over
    ``max_result_bytes``): a retry would return the same, so the job goes to dead."""


def classify(
    exc: BaseException | None,
    *,
    attempt: int,
    max_attempts: int,
    retry: RetryPolicy,
    permanent: tuple[type[BaseException], ...] = (),
    rng: random.Random | None = None,
) -> Decision:
    """Decide a finished attempt's fate. ``exc`` is None on success."""
    if exc is None:
        return Decision(Disposition.SUCCEED)
    if isinstance(exc, Snooze):
        return Decision(Disposition.SNOOZE, exc.in_s)
    if isinstance(exc, Parked):
        return Decision(Disposition.PARK, exc.timeout_s)
    error = error_record(attempt, exc)
    if isinstance(exc, NewerPayload):
        return Decision(Disposition.SNOOZE, exc.in_s, error)
    if isinstance(exc, Cancel):
        return Decision(Disposition.CANCEL, error=error)
    if isinstance(exc, UnrunnableJob) or (permanent and isinstance(exc, permanent)):
        return Decision(Disposition.DEAD, error=error)
    if attempt >= max_attempts:
        return Decision(Disposition.DEAD, error=error)
    if isinstance(exc, Retry):
        return Decision(Disposition.RETRY, exc.in_s, error)
    return Decision(Disposition.RETRY, retry.delay(attempt, rng), error)
