"""A supervised child's reports to its supervisor (``--processes``): one line each, on the
pipe the supervisor passed it (``SKIPLOCK_READY_FD``); nothing without a supervisor.

A leaf module: the worker reports its id from here, and the supervisor, which builds an App
when a child dies, imports the worker's side only through it.
"""

from __future__ import annotations

import contextlib
import json
import os

READY_FD_ENV = "SKIPLOCK_READY_FD"
READY_LINE = b"ready"
WORKER_PREFIX = b"worker "
_report_fd: list[int | None] = []
"""The pipe to this process's supervisor, read from the environment once (then removed from
it, so a process this one starts does not write to it): [] not read yet, [None] none."""


def _report(line: bytes) -> None:
    if not _report_fd:
        value = os.environ.pop(READY_FD_ENV, None)
        _report_fd.append(int(value) if value and value.isdigit() else None)
    fd = _report_fd[0]
    if fd is not None:
        with contextlib.suppress(OSError):  # a supervisor gone does not stop its child
            os.write(fd, line + b"\n")  # under PIPE_BUF: written whole, never interleaved


def report_ready() -> None:
    """In a child: tell the supervisor this process started (nothing without a supervisor)."""
    _report(READY_LINE)


def report_worker(worker_id: str, url: str, lanes: tuple[str, ...] = ("default",)) -> None:
    """In a child: tell the supervisor the id of a worker about to claim (its lease token
    prefix), its database and the lanes it claims, so that its leases are released as soon as
    this process exits."""
    report = {"id": worker_id, "url": url, "lanes": list(lanes)}
    _report(WORKER_PREFIX + json.dumps(report).encode())
