"""``--processes N``: N worker processes under one supervisor.

Children are fresh interpreters (``python -m skiplock worker ...`` with ``--processes 1``),
not forks: nothing of the parent's event loop or connections leaks into them. The supervisor
forwards SIGTERM/SIGINT, restarts a child that dies unexpectedly, and exits when all children
have exited after a stop, with the worst exit code among them.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from types import FrameType

log = logging.getLogger("skiplock.supervisor")

RESTART_DELAY_S = 1.0


def _child_argv(argv: list[str]) -> list[str]:
    """The same command line with ``--processes 1``."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--processes", "-p"):
            skip = True
            continue
        if arg.startswith("--processes="):
            continue
        out.append(arg)
    return [sys.executable, "-m", "skiplock", *out, "--processes", "1"]


def supervise(argv: list[str], processes: int) -> int:
    command = _child_argv(argv)
    children: list[subprocess.Popen[bytes]] = []
    stopping = False

    def forward(sig: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(sig)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    children.extend(subprocess.Popen(command) for _ in range(processes))
    log.info("supervisor started %d workers: %s", processes, [c.pid for c in children])
    worst = 0
    while children:
        for child in list(children):
            code = child.poll()
            if code is None:
                continue
            children.remove(child)
            if stopping:
                # Exits by the signal we forwarded (before a handler was installed) are clean.
                if -code not in (signal.SIGTERM, signal.SIGINT):
                    worst = max(worst, abs(code))
            elif "--burst" in command and code == 0:
                pass  # a burst worker that found nothing left to do
            else:
                log.error("worker %d exited with %d; restarting it", child.pid, code)
                time.sleep(RESTART_DELAY_S)
                if not stopping:
                    children.append(subprocess.Popen(command))
        time.sleep(0.2)
    return worst
