"""A process task that keeps its log (issue 47, ``job_log=True`` with ``executor="process"``):
module-level, as a child imports it by module and name."""

from __future__ import annotations

import logging
import os

import skiplock

app = skiplock.App()  # the test sets its url

log = logging.getLogger("tests.job_log.child")
log.setLevel(logging.DEBUG)


@app.task(executor="process", job_log=True)
def in_child(n: int) -> int:
    """Logs ``n`` lines at two levels from its child process; returns the child's pid."""
    for i in range(n):
        log.info("child line %d", i)
    log.warning("child done")
    return os.getpid()
