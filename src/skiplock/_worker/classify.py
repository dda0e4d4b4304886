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


class NewerPayload(Exception):
    """The job's payload is a version newer than this worker's task knows (a rolled-back
    deploy): it is put back for ``in_s`` seconds, its attempt given back, the reason kept."""

    def __init__(self, message: str, in_s: float) -> None:
        super().__init__(message)
        self.in_s = in_s


class UnstorableResult(UnrunnableJob):
    """The task returned a value that cannot be stored (not strict JSON, over
    ``max_result_bytes``): a retry would return the same, so the job goes to dead."""


@dataclass(frozen=True, slots=True)
class Decision:
    disposition: Disposition
    delay_s: float = 0.0
    error: dict[str, Any] | None = None
    result_json: str | None = None
    """What a success stores as the job's result (None: nothing)."""

    @property
    def outcome(self) -> str:
        return self.disposition.value


def _safe_text(exc: BaseException) -> str:
    """``str(exc)``, which a hostile exception may make raise: the record must still be built."""
    try:
        return str(exc)
    except Exception:
        return "<str() of this exception raised>"


def _bounded_traceback(exc: BaseException, message: str) -> str:
    """The innermost frames that fit, then the head of the message.

    A huge message must not push the stack out of the record: the frames are cut from the
    outside in (the innermost are where it failed), the message from its tail.
    """
    try:
        formatted = traceback.TracebackException.from_exception(exc)
        tail = len(list(formatted.format_exception_only()))
        frames = "".join(list(formatted.format())[:-tail])
    except Exception:
        frames = ""
    room = MAX_TRACEBACK_CHARS - len(message) - 1
    if len(frames) > room:
        cut = frames[len(frames) - room + 2 :]
        frames = "…\n" + cut[cut.find("\n") + 1 :]
    return f"{frames}{message}\n"


def error_record(attempt: int, exc: BaseException) -> dict[str, Any]:
    """What a job keeps of a failed attempt: bounded message and traceback, never the args."""
    text = _safe_text(exc)
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    message = message[:MAX_MESSAGE_CHARS]
    return {
        "attempt": attempt,
        "at": datetime.now(UTC).isoformat(),
        "message": message,
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "traceback": _bounded_traceback(exc, message),
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
