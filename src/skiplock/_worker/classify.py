"""Turn how an attempt ended into what happens to its row: a pure function, table-tested."""

from __future__ import annotations

import random
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .._backends.base import MAX_TRACEBACK_CHARS
from .._config import RetryPolicy
from .._job import Disposition
from .._outcomes import Cancel, Retry, Snooze

MAX_MESSAGE_CHARS = 2000


class JobTimeout(Exception):
    """The attempt ran past its task's timeout."""


class UnrunnableJob(Exception):
    """The job cannot run at all here (unknown task, corrupt payload): it goes to dead."""


@dataclass(frozen=True, slots=True)
class Decision:
    disposition: Disposition
    delay_s: float = 0.0
    error: dict[str, Any] | None = None

    @property
    def outcome(self) -> str:
        return self.disposition.value


def error_record(attempt: int, exc: BaseException) -> dict[str, Any]:
    """What a job keeps of a failed attempt: bounded message and traceback, never the args."""
    text = "".join(traceback.format_exception(exc))
    message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return {
        "attempt": attempt,
        "at": datetime.now(UTC).isoformat(),
        "message": message[:MAX_MESSAGE_CHARS],
        "traceback": text[-MAX_TRACEBACK_CHARS:],
    }


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
    error = error_record(attempt, exc)
    if isinstance(exc, Cancel):
        return Decision(Disposition.CANCEL, error=error)
    if isinstance(exc, UnrunnableJob) or (permanent and isinstance(exc, permanent)):
        return Decision(Disposition.DEAD, error=error)
    if attempt >= max_attempts:
        return Decision(Disposition.DEAD, error=error)
    if isinstance(exc, Retry):
        return Decision(Disposition.RETRY, exc.in_s, error)
    return Decision(Disposition.RETRY, retry.delay(attempt, rng), error)
