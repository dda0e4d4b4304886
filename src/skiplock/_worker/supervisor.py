"""``--processes N``: N worker processes under one supervisor.

Children are fresh interpreters (``python -m skiplock worker ...`` with ``--processes 1``),
not forks: nothing of the parent's event loop or connections leaks into them. The supervisor
forwards SIGTERM/SIGINT and exits when all children have exited after a stop, with the worst
exit code among them.

Each child reports once that it is ready (APP imported, database answering with a current
schema) by writing a byte to a pipe the supervisor passes it (``SKIPLOCK_READY_FD``). A child
that exits before it was ever ready failed at start-up (bad APP, import error, unmigrated
schema): restarting it cannot help, so the supervisor stops every child and exits with that
child's code (its one-line error is already on stderr). A child that dies after it was ready
is restarted, after a delay that doubles with each death in a row (1 s up to a minute) and
starts again from 1 s once a child has stayed up a minute after it was ready (a job that
kills its worker every time must not make the supervisor spin).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from types import FrameType

from .._config import WorkerConfig

log = logging.getLogger("skiplock.supervisor")

READY_FD_ENV = "SKIPLOCK_READY_FD"
PROCESS_INDEX_ENV = "SKIPLOCK_PROCESS_INDEX"
"""Set by the supervisor for each child: 0..N-1 (``process_ports`` offsets its ports by it)."""
POLL_S = 0.2
STABLE_S = 60.0
"""A child up this long after it was ready ends a run of deaths: the next restart waits 1 s."""


def process_ports(config: WorkerConfig) -> WorkerConfig:
    """``config`` with its metrics and health ports offset by this child's process index, so
    N processes under one supervisor serve N ports (none: unchanged)."""
    index = int(os.environ.get(PROCESS_INDEX_ENV, "0") or 0)
    if not index:
        return config
    ports = {
        name: getattr(config, name) + index
        for name in ("metrics_port", "health_port")
        if getattr(config, name)
    }
    return dataclasses.replace(config, **ports)


def report_ready() -> None:
    """In a child: tell the supervisor this worker started (nothing without a supervisor)."""
    fd = os.environ.pop(READY_FD_ENV, None)
    if fd is None:
        return
    with contextlib.suppress(OSError, ValueError):
        os.write(int(fd), b"1")
        os.close(int(fd))


@dataclass
class Backoff:
    """Restart delays: ``first_s`` doubled per death in a row, at most ``cap_s``."""

    first_s: float = 1.0
    cap_s: float = 60.0
    deaths: int = 0

    def next_delay(self) -> float:
        self.deaths += 1
        return float(min(self.cap_s, self.first_s * 2 ** min(self.deaths - 1, 32)))

    def reset(self) -> None:
        self.deaths = 0


@dataclass
class Child:
    """One worker process and the read end of its readiness pipe."""

    process: subprocess.Popen[bytes]
    ready_fd: int
    ready_at: float | None = None
    stable: bool = False
    index: int = 0
    """Its place among the supervisor's N processes: its ports are the options' + index."""

    @property
    def ready(self) -> bool:
        return self.ready_at is not None

    @classmethod
    def start(cls, command: list[str], index: int = 0) -> Child:
        """Start a child; ``index`` (0..N-1, reused by its restarts) offsets its ports."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        env = {**os.environ, READY_FD_ENV: str(write_fd), PROCESS_INDEX_ENV: str(index)}
        try:
            process = subprocess.Popen(command, env=env, pass_fds=(write_fd,))
        finally:
            os.close(write_fd)
        return cls(process, read_fd, index=index)

    def poll_ready(self) -> bool:
        """True the first time the child's byte has arrived."""
        if self.ready:
            return False
        with contextlib.suppress(BlockingIOError):
            if os.read(self.ready_fd, 1) == b"1":
                self.ready_at = time.monotonic()
        return self.ready

    def became_stable(self) -> bool:
        """True the first time the child has been ready for ``STABLE_S``."""
        if self.stable or self.ready_at is None:
            return False
        self.stable = time.monotonic() - self.ready_at >= STABLE_S
        return self.stable

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.ready_fd)


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


@dataclass
class Supervisor:
    command: list[str]
    children: list[Child] = field(default_factory=list)
    backoff: Backoff = field(default_factory=Backoff)
    stopping: bool = False
    worst: int = 0
    restarts_due: list[float] = field(default_factory=list)
    free_indexes: list[int] = field(default_factory=list)
    """Process indexes of children waiting to be restarted (the restart takes one)."""

    def forward(self, sig: int, _frame: FrameType | None) -> None:
        self.stopping = True
        for child in self.children:
            if child.process.poll() is None:
                child.process.send_signal(sig)

    def stop_all(self, sig: int = signal.SIGTERM) -> None:
        self.restarts_due.clear()
        self.forward(sig, None)

    def run(self, processes: int) -> int:
        self.children.extend(Child.start(self.command, i) for i in range(processes))
        log.info("supervisor started %d workers: %s", processes, self.pids())
        while self.children or (self.restarts_due and not self.stopping):
            for child in list(self.children):
                self.check(child)
            self.restart_due()
            time.sleep(POLL_S)
        return self.worst

    def pids(self) -> list[int]:
        return [c.process.pid for c in self.children]

    def check(self, child: Child) -> None:
        if child.poll_ready():
            log.info("worker %d ready", child.process.pid)
        if child.became_stable():
            self.backoff.reset()
        code = child.process.poll()
        if code is None:
            return
        child.poll_ready()  # a byte written just before exiting still counts
        self.children.remove(child)
        child.close()
        self.exited(child, code)

    def exited(self, child: Child, code: int) -> None:
        pid = child.process.pid
        if self.stopping:
            # Exits by the signal we forwarded (before a handler was installed) are clean.
            if -code not in (signal.SIGTERM, signal.SIGINT):
                self.worst = max(self.worst, abs(code))
        elif "--burst" in self.command and code == 0:
            pass  # a burst worker that found nothing left to do
        elif not child.ready:
            log.error(
                "worker %d failed at start-up (exit code %d; its error is above): not "
                "restarting it; stopping the other workers",
                pid,
                code,
            )
            self.worst = max(self.worst, abs(code) or 1)
            self.stop_all()
        else:
            delay = self.backoff.next_delay()
            log.error("worker %d exited with %d; restarting it in %.0fs", pid, code, delay)
            self.restarts_due.append(time.monotonic() + delay)
            self.free_indexes.append(child.index)

    def restart_due(self) -> None:
        now = time.monotonic()
        for due in [d for d in self.restarts_due if d <= now]:
            self.restarts_due.remove(due)
            if not self.stopping:
                index = self.free_indexes.pop(0) if self.free_indexes else 0
                child = Child.start(self.command, index)
                self.children.append(child)
                log.info("restarted a worker as %d", child.process.pid)


def supervise(argv: list[str], processes: int) -> int:
    """Run ``processes`` copies of this worker command line until they all exit."""
    supervisor = Supervisor(_child_argv(argv))
    signal.signal(signal.SIGTERM, supervisor.forward)
    signal.signal(signal.SIGINT, supervisor.forward)
    return supervisor.run(processes)
