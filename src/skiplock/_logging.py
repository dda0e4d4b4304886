"""Logs for people and for machines: skiplock's records as one JSON object per line
(``JsonFormatter``), and ``configure_logging`` to pick either format from Python the way
``skiplock worker --log-format`` does.

A job's events (``skiplock.jobs``: started, succeeded, retry, snoozed, released, cancelled,
dead, reclaimed) carry their fields as record attributes, so the JSON line has them as keys:
``event``, ``job_id``, ``task``, ``queue``, ``attempt``, ``max_attempts``, ``duration_s``,
``worker``, ``correlation_id``, and per event ``retry_in_s``, ``error_type``, ``lost_by``.
The routine events (started, succeeded, snoozed, released) are DEBUG; at INFO the worker
logs one ``event=summary`` line an interval on ``skiplock.worker``, its counts under
``summary`` (``WorkerConfig.log_summary_interval_s``).
Never arguments, keyword arguments, results or error messages (which may quote arguments):
``skiplock job show`` is the one place a person reads those.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import IO, Any

from ._printable import printable

JOB_FIELDS = (
    "event",
    "job_id",
    "task",
    "queue",
    "attempt",
    "max_attempts",
    "duration_s",
    "worker",
    "correlation_id",
    "outcome",
    "retry_in_s",
    "error_type",
    "lost_by",
    "summary",
)
"""The record attributes a JSON line carries as keys, when a record has them."""

PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s"
FORMATS = ("plain", "json")


class PlainFormatter(logging.Formatter):
    """``PLAIN_FORMAT`` for a person: skiplock's own records with their control characters
    shown (``printable``; a traceback keeps its lines), since they name queues, tasks and
    workers that whoever enqueued or ran a job chose. The application's own records are left
    as they are (they may colour themselves on purpose)."""

    def __init__(self) -> None:
        super().__init__(PLAIN_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.name == "skiplock" or record.name.startswith("skiplock."):
            return printable(text, multiline=True)
        return text


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts`` (ISO 8601, UTC), ``level``, ``logger``, ``pid``,
    ``message``, the job fields the record has, and ``exception`` (its traceback) if any."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        for name in JOB_FIELDS:
            if name in record.__dict__:
                out[name] = record.__dict__[name]
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def configure_logging(
    *, level: str | int = "info", format: str = "plain", stream: IO[str] | None = None
) -> None:
    """Send every log record at ``level`` or above to ``stream`` (stderr) as ``plain`` text
    for a person or ``json`` lines for a collector, replacing the root logger's handlers."""
    if format not in FORMATS:
        raise ValueError(f"format={format!r}: use one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else PlainFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
