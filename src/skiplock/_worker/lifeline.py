"""A supervised child stops, as on SIGTERM, once its supervisor is gone.

A ``--processes`` supervisor killed with SIGKILL (a process manager escalating, the OOM
killer) used to leave its children running as orphans, claiming jobs, watched by nobody; the
restart then added N more. Now the supervisor makes one pipe, keeps its write end open for as
long as it lives and never writes to it; each child gets the read end (``LIFELINE_FD_ENV``).
The kernel closes a dead process's descriptors, whatever killed it, so the child's read
returns end-of-file. There is no race with a parent that dies before the child looks: the
end-of-file stays, and a child that starts reading late reads it at once. Portable to any
POSIX system, unlike Linux's ``PR_SET_PDEATHSIG`` (which also fires when merely the thread
that started the child ends).

The child reads on a daemon thread from its first moment (before its APP is imported) and on
end-of-file sends itself SIGTERM once: the stop a worker already knows. Before its event loop
runs, that exits without claiming; in it, the worker stops claiming, lets running jobs finish
within ``--shutdown-timeout``, releases the rest to pending, leaves the registry and exits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading

LIFELINE_FD_ENV = "SKIPLOCK_LIFELINE_FD"

log = logging.getLogger("skiplock.worker")


class Lifeline:
    """The supervisor's side: the pipe whose write end lives as long as this process."""

    def __init__(self) -> None:
        self.read_fd, self._write_fd = os.pipe()  # neither inherited unless passed

    def env(self) -> dict[str, str]:
        """What a child's environment gets (pass ``read_fd`` to it too)."""
        return {LIFELINE_FD_ENV: str(self.read_fd)}

    def close(self) -> None:
        """Cut it: every child still holding the read end stops."""
        for fd in (self._write_fd, self.read_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def watch_supervisor() -> bool:
    """In a supervised child: stop (SIGTERM to this process) as soon as the supervisor is
    gone. False (nothing watched) without a supervisor. The variable is removed from the
    environment: a process a job starts is not the supervisor's child."""
    value = os.environ.pop(LIFELINE_FD_ENV, "")
    if not value.isdigit():
        return False
    fd, parent = int(value), os.getppid()

    def watch() -> None:
        try:
            while os.read(fd, 512):  # nothing is ever written: only the end-of-file counts
                pass
        except OSError:
            return  # the descriptor went away: nothing to watch
        log.warning(
            "the supervisor (pid %d) is gone: stopping as on SIGTERM (running jobs get the "
            "shutdown timeout, then go back to pending)",
            parent,
        )
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="skiplock-lifeline", daemon=True).start()
    return True
