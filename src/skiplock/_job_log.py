"""A job's own log (issue 47): the log records an attempt emits while it runs, kept with it.

Opt-in (``job_log=True`` on a task or the App). While an attempt of such a task runs, its
context holds a ``LogBuffer`` (``capture``); one ``JobLogHandler`` on the root logger hands
each record to the buffer of the context it was emitted in. An async job runs in its own
asyncio Task and a sync job's thread runs in a copy of its attempt's context, so each record
lands in the attempt that emitted it and two interleaved jobs' lines never mix (a shared
buffer, or a buffer keyed by thread, would mix them: many async jobs share the loop's
thread). The handler only reads: records go on to the worker's own handlers unchanged, and
what reaches it is what ``logging`` lets through (a logger's level still decides).

Bounded by bytes (``job_log_bytes``, 64 KiB by default): the tail is kept, the head dropped
and counted (``cut_lines``, ``cut_bytes``), since the end of a log is where an attempt
failed. The worker writes the attempt's ``JobLog`` just before its outcome; the prune deletes
the logs whose job is gone.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

DEFAULT_JOB_LOG_BYTES = 64 * 1024
"""How many bytes of log lines one attempt keeps by default (its tail)."""
MIN_JOB_LOG_BYTES = 256
MAX_JOB_LOG_BYTES = 16 * 2**20
"""The bounds of ``job_log_bytes``: room for a line, and no row of many megabytes."""

CUT_MARK = "…"


@dataclass(frozen=True, slots=True)
class LogLine:
    """One log record as the attempt kept it."""

    at: datetime
    level: str
    logger: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {
            "at": self.at.isoformat(),
            "level": self.level,
            "logger": self.logger,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class JobLog:
    """What one attempt of a job logged: its lines (the tail that fit the cap, oldest first)
    and how much of its head was cut to keep them (0, 0: nothing was)."""

    job_id: int
    attempt: int
    lines: tuple[LogLine, ...]
    cut_lines: int = 0
    cut_bytes: int = 0

    def as_json(self) -> dict[str, Any]:
        """As ``skiplock job show --json`` carries it."""
        return {
            "attempt": self.attempt,
            "lines": [line.as_json() for line in self.lines],
            "cut_lines": self.cut_lines,
            "cut_bytes": self.cut_bytes,
        }

    def lines_json(self) -> str:
        """The lines as stored: a JSON array of ``[at, level, logger, message]``."""
        return json.dumps(
            [[line.at.isoformat(), line.level, line.logger, line.message] for line in self.lines],
            ensure_ascii=False,
        )


def job_log_of(
    job_id: int, attempt: int, lines_json: str, cut_lines: int, cut_bytes: int
) -> JobLog:
    """A stored row as a ``JobLog``."""
    lines = tuple(
        LogLine(datetime.fromisoformat(at), level, logger, message)
        for at, level, logger, message in json.loads(lines_json)
    )
    return JobLog(job_id, attempt, lines, int(cut_lines), int(cut_bytes))


def log_lines(log: JobLog, tail: int | None = None) -> list[str]:
    """An attempt's log as text for a person (``skiplock job show``, the Django admin): a
    heading saying what was cut, then each line's time, level, logger and message (the last
    ``tail`` lines; None: all of them)."""
    shown = log.lines if tail is None else log.lines[-tail:]
    hidden = len(log.lines) - len(shown)
    said = f"; {log.cut_lines} earlier lines ({log.cut_bytes} bytes) cut" if log.cut_lines else ""
    if hidden:
        said += f"; {hidden} earlier lines not shown (--json has them)"
    lines = [f"log of attempt {log.attempt}: {len(log.lines)} lines{said}"]
    for line in shown:
        for i, text in enumerate(line.message.splitlines() or [""]):
            head = f"{line.at:%H:%M:%S} {line.level:<8} {line.logger}: " if i == 0 else "    "
            lines.append(f"  {head}{text}")
    return lines


Raw = tuple[float, str, str, str]
"""A line while it is captured: (created, level, logger, message); it crosses a process
executor's pipe as it is."""


def _size(raw: Raw) -> int:
    """The bytes a line takes in the stored JSON (its text, the level, the logger's name and
    its timestamp, with the punctuation around them)."""
    return len(raw[3].encode()) + len(raw[1]) + len(raw[2].encode()) + 48


class LogBuffer:
    """One attempt's lines while it runs, its tail within ``cap`` bytes. Thread-safe: a sync
    job's own threads, and its thread next to the loop, may log at once."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._lines: deque[tuple[Raw, int]] = deque()
        self._bytes = 0
        self.cut_lines = 0
        self.cut_bytes = 0
        self._lock = threading.Lock()

    def add(self, raw: Raw) -> None:
        """Keep a line; drop the oldest ones while the kept lines are over the cap (a line
        over the cap on its own keeps the tail of its message)."""
        size = _size(raw)
        if size > self.cap:
            message = raw[3].encode()
            keep = max(0, len(message) - (size - self.cap) - len(CUT_MARK.encode()))
            text = message[len(message) - keep :].decode(errors="ignore")
            cut = len(message) - keep
            raw = (raw[0], raw[1], raw[2], CUT_MARK + text)
            size = _size(raw)
            with self._lock:
                self.cut_bytes += cut
        with self._lock:
            self._lines.append((raw, size))
            self._bytes += size
            while self._bytes > self.cap and self._lines:
                _, dropped = self._lines.popleft()
                self._bytes -= dropped
                self.cut_lines += 1
                self.cut_bytes += dropped

    def extend(self, raws: Any, cut_lines: int = 0, cut_bytes: int = 0) -> None:
        """Lines captured elsewhere (a process task's child) and what was cut there."""
        with self._lock:
            self.cut_lines += cut_lines
            self.cut_bytes += cut_bytes
        for raw in raws:
            self.add(tuple(raw))

    @property
    def empty(self) -> bool:
        """Nothing was logged (nothing kept, nothing cut): no row to write."""
        with self._lock:
            return not self._lines and not self.cut_lines and not self.cut_bytes

    def raw(self) -> tuple[list[Raw], int, int]:
        """The lines kept and what was cut, as they cross a pipe."""
        with self._lock:
            return [raw for raw, _ in self._lines], self.cut_lines, self.cut_bytes

    def job_log(self, job_id: int, attempt: int) -> JobLog:
        """What the attempt keeps, as written."""
        raws, cut_lines, cut_bytes = self.raw()
        lines = tuple(
            LogLine(datetime.fromtimestamp(created, UTC), level, logger, message)
            for created, level, logger, message in raws
        )
        return JobLog(job_id, attempt, lines, cut_lines, cut_bytes)


_capturing: contextvars.ContextVar[LogBuffer | None] = contextvars.ContextVar(
    "skiplock_job_log", default=None
)
"""The buffer of the attempt whose context this is (None: no attempt keeps a log here)."""


def capture(buffer: LogBuffer | None) -> None:
    """From now on, in this context (and the contexts copied from it), log records go to
    ``buffer`` too."""
    _capturing.set(buffer)


_FORMATTER = logging.Formatter()


class JobLogHandler(logging.Handler):
    """On the root logger: each record to the buffer of the attempt it was emitted in."""

    def emit(self, record: logging.LogRecord) -> None:
        buffer = _capturing.get()
        if buffer is None:
            return
        try:
            try:
                message = record.getMessage()
            except Exception:  # a bad format string: the text as given
                message = str(record.msg)
            if record.exc_info:
                message = f"{message}\n{_FORMATTER.formatException(record.exc_info)}"
            elif record.exc_text:
                message = f"{message}\n{record.exc_text}"
            buffer.add((record.created, record.levelname, record.name, message))
        except Exception:  # never the job's failure: logging's own report, as any handler's
            self.handleError(record)

    def handle(self, record: logging.LogRecord) -> bool:
        # Nothing to do (and no lock to take) outside an attempt that keeps a log.
        if _capturing.get() is None:
            return False
        return super().handle(record)


_installed: JobLogHandler | None = None
_users = 0
_install_lock = threading.Lock()


def install() -> None:
    """Put the handler on the root logger (once however many workers of this process keep
    logs; ``uninstall`` as many times takes it off)."""
    global _installed, _users
    with _install_lock:
        _users += 1
        if _installed is None:
            _installed = JobLogHandler()
            logging.getLogger().addHandler(_installed)


def uninstall() -> None:
    global _installed, _users
    with _install_lock:
        _users = max(0, _users - 1)
        if _users == 0 and _installed is not None:
            logging.getLogger().removeHandler(_installed)
            _installed = None


def install_once() -> None:
    """The handler on the root logger for good (a process executor's child: it runs jobs
    until it exits)."""
    with _install_lock:
        global _installed
        if _installed is None:
            _installed = JobLogHandler()
            logging.getLogger().addHandler(_installed)
