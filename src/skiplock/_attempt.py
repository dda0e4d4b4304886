"""What one attempt of a job leaves behind: the ``Decision`` on its row and the bounded
error record it keeps. Pure records, below the worker, so eager mode (``_eager``), the tracing
seam (``_tracing``) and the worker's classifier share them without importing worker code."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ._job import Disposition
from ._limits import MAX_TRACEBACK_CHARS

MAX_MESSAGE_CHARS = 2000


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
    child = getattr(exc, "child_traceback", None)  # raised in a child process (processes.py)
    if isinstance(child, str):
        frames = child
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
