"""``--processes N``: N worker processes under one supervisor.

Children are fresh interpreters (``python -m skiplock worker ...`` with ``--processes 1``),
not forks: nothing of the parent's event loop or connections leaks into them. The supervisor
forwards SIGTERM/SIGINT and exits when all children have exited after a stop, with the worst
exit code among them.

Each child reports once that it is ready (APP imported, database answering with a current
schema) by writing a line to a pipe the supervisor passes it (``SKIPLOCK_READY_FD``), and each
worker it runs writes its id (``Worker.id``, the prefix of its lease tokens) there before its
first claim. When a child exits for any reason (SIGKILL, ``os._exit``, the OOM killer), the
supervisor releases every lease under those ids at once (``release``, e.g.
``App.release_worker``): nothing renews them any more, and without this its jobs and the ones
it had claimed ahead waited out their whole lease (up to 330 s for a task without a timeout).
Its row in the live-worker registry goes too (it counted as live for a minute of silence).
The reclaim rule applies (the attempt stays spent); fencing is unchanged, since a released
row's lease token is cleared and a write under the dead worker's token matches nothing. A child
that exits before it was ever ready failed at start-up (bad APP, import error, unmigrated
schema): restarting it cannot help, so the supervisor stops every child and exits with that
child's code (its one-line error is already on stderr). A child that dies after it was ready
is restarted, after a delay that doubles with each death in a row (1 s up to a minute) and
starts again from 1 s once a child has stayed up a minute after it was ready (a job that
kills its worker every time must not make the supervisor spin). Each child is told how often
the supervisor restarted a crashed child before it, in all and in a row (the deaths its
backoff counts, ``RESTARTS_ENV``): its registry row shows them (``skiplock workers``), and
three in a row, a crash loop, turn ``skiplock health`` red. A ready child that exits 0 on
its own (a SIGTERM sent to it alone) crashed nothing: it is logged as a clean stop and
started again, without counting.

The children watch their supervisor (``lifeline``): killed in any way, it leaves no orphans
claiming jobs; they stop as on SIGTERM.

Every stop signal the supervisor receives is owed to every child, the ones it is starting
included: a SIGTERM that lands while a child is being started (its ``Popen`` takes a moment,
longer on a loaded machine) reaches that child as soon as it is in the list. Before, the
signal went to the children listed at that moment, the one being started never heard it,
and the supervisor waited for it for ever (CI's test_crash, stopped right after a restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import NamedTuple

from .._backends import open_backend
from .._backends.params import JobReclaimWorkerParams
from .._config import WorkerConfig
from .._job import DEFAULT_LANE
from .._observe.liveness import RESTARTS_ENV, STABLE_S
from .._schema import refuse_newer
from .lifeline import Lifeline, watch_supervisor
from .report import READY_FD_ENV, READY_LINE, WORKER_PREFIX, report_ready, report_worker

__all__ = [
    "Supervisor",
    "process_ports",
    "report_ready",
    "report_worker",
    "supervise",
    "watch_supervisor",
]

log = logging.getLogger("skiplock.supervisor")

PROCESS_INDEX_ENV = "SKIPLOCK_PROCESS_INDEX"
"""Set by the supervisor for each child: 0..N-1 (``process_ports`` offsets its ports by it)."""
POLL_S = 0.2
RELEASE_TIMEOUT_S = 10.0
"""The longest a child's death holds the supervisor releasing its leases (the database away:
they expire and are reclaimed as before)."""

PROCESSES_PER_CPU = 4
"""The most worker processes per usable CPU a ``--processes`` option takes unless forced
(``skiplock worker``, Django's ``concurrent_worker`` and ``task_worker``)."""


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, as a container's cpuset sets it),
    else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def too_many_processes(processes: int, instead: str) -> str | None:
    """Why ``processes`` is refused without ``--force-processes`` (more than PROCESSES_PER_CPU
    per usable CPU), else None. Each is a whole worker (an event loop, a database pool, its
    own claims), so past that they only contend: 1000 on 2 cores ran at load 177 and took
    minutes to stop. ``instead`` is what to do instead, as a clause."""
    cpus = usable_cpus()
    bound = PROCESSES_PER_CPU * cpus
    if processes <= bound:
        return None
    return (
        f"--processes {processes}: more than {PROCESSES_PER_CPU} per CPU ({bound} for the "
        f"{cpus} this process may use); each is a whole worker with its own event loop and "
        f"database connections. {instead}, or pass --force-processes to run them anyway"
    )


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


class Reported(NamedTuple):
    """A worker a child reported running: its id, its database and the lanes it claims."""

    id: str
    url: str
    lanes: tuple[str, ...] = (DEFAULT_LANE,)


def release_by_url(workers: list[Reported]) -> list[int]:
    """Release the leases of these workers (each in every lane it claims) and forget their
    registry rows, on a loop of its own, within RELEASE_TIMEOUT_S; the job ids released."""

    async def release() -> list[int]:
        released: list[int] = []
        for url in dict.fromkeys(w.url for w in workers):
            backend = open_backend(url)
            await backend.open()
            try:
                await refuse_newer(backend, url)  # as any App would, before it writes
                for worker in (w for w in workers if w.url == url):
                    worker_id = worker.id
                    for lane in worker.lanes:
                        released += await backend.job_reclaim_worker(
                            JobReclaimWorkerParams(worker_id, lane=lane)
                        )
                    # and its registry row, which would count it live (workers, health, the
                    # dashboard) until a minute of silence
                    await backend.worker_delete(worker_id)
            finally:
                await backend.close()
        return released

    async def bounded() -> list[int]:
        async with asyncio.timeout(RELEASE_TIMEOUT_S):
            return await release()

    return asyncio.run(bounded())


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


def describe_exit(code: int) -> str:
    """An exit code in words: ``was killed by SIGKILL``, ``exited with code 7``."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


@dataclass
class Child:
    """One worker process and the read end of its readiness pipe."""

    process: subprocess.Popen[bytes]
    ready_fd: int
    ready_at: float | None = None
    stable: bool = False
    index: int = 0
    """Its place among the supervisor's N processes: its ports are the options' + index."""
    workers: list[Reported] = field(default_factory=list)
    """The workers it reported running (id, database URL, lanes): their leases are released
    when it exits."""
    exited_before_stop: bool = False
    """Found exited (not yet seen by ``check``) when the stop came: a crash, not counted."""
    signalled: int = 0
    """How many of the supervisor's stop signals it was sent (``Supervisor.asked``)."""
    _partial: bytes = b""

    @property
    def ready(self) -> bool:
        return self.ready_at is not None

    @classmethod
    def start(
        cls,
        command: list[str],
        index: int = 0,
        lifeline: Lifeline | None = None,
        restarts: tuple[int, int] = (0, 0),
    ) -> Child:
        """Start a child; ``index`` (0..N-1, reused by its restarts) offsets its ports; it
        watches ``lifeline`` and is told its supervisor's ``restarts`` (in all, in a row)."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        env = {**os.environ, READY_FD_ENV: str(write_fd), PROCESS_INDEX_ENV: str(index)}
        passed = [write_fd]
        if lifeline is not None:
            env |= lifeline.env()
            passed.append(lifeline.read_fd)
        env[RESTARTS_ENV] = f"{restarts[0]} {restarts[1]}"
        try:
            process = subprocess.Popen(command, env=env, pass_fds=passed)
        finally:
            os.close(write_fd)
        return cls(process, read_fd, index=index)

    def poll_ready(self) -> bool:
        """Read what the child reported; True the first time it reported ready."""
        was_ready = self.ready
        for line in self._read_lines():
            if line == READY_LINE and self.ready_at is None:
                self.ready_at = time.monotonic()
            elif line.startswith(WORKER_PREFIX):
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    worker = json.loads(line[len(WORKER_PREFIX) :])
                    lanes = tuple(str(lane) for lane in worker.get("lanes") or (DEFAULT_LANE,))
                    self.workers.append(Reported(str(worker["id"]), str(worker["url"]), lanes))
        return self.ready and not was_ready

    def _read_lines(self) -> list[bytes]:
        data = b""
        with contextlib.suppress(BlockingIOError, OSError):
            while chunk := os.read(self.ready_fd, 65536):
                data += chunk
        *lines, self._partial = (self._partial + data).split(b"\n")
        return lines

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


Release = Callable[[list[Reported]], list[int]]
"""Returns every lease of these (worker id, database URL) pairs to pending; the ids released."""


@dataclass
class Supervisor:
    command: list[str]
    release: Release | None = release_by_url
    """Called with a child's workers when it exits (None: their leases wait out their
    expiry)."""
    children: list[Child] = field(default_factory=list)
    backoff: Backoff = field(default_factory=Backoff)
    stopping: bool = False
    worst: int = 0
    restarts_due: list[float] = field(default_factory=list)
    free_indexes: list[int] = field(default_factory=list)
    """Process indexes of children waiting to be restarted (the restart takes one)."""
    restarts: int = 0
    """Children restarted after a crash, in all (``backoff.deaths``: in a row)."""
    lifeline: Lifeline | None = None
    """The pipe the children watch (made by ``run``, cut as it returns)."""
    asked: list[int] = field(default_factory=list)
    """Every stop signal received, in order: each child is owed all of them (a second
    SIGTERM skips the drain, as it does for one worker)."""
    _sending: bool = field(default=False, init=False, repr=False)
    _again: bool = field(default=False, init=False, repr=False)

    def forward(self, sig: int, _frame: FrameType | None) -> None:
        """The signal handler: owe ``sig`` to every child and send it to those listed now.
        A child being started is sent it once it is listed (``send_owed`` after each start)."""
        self.stopping = True
        self.asked.append(sig)
        self.send_owed()

    def send_owed(self) -> None:
        """Send every child the stop signals it has not been sent. Re-entrant safely: the
        handler can interrupt the loop's own call between any two bytecodes; it then leaves
        the sending to that call (which looks again), so no child is sent a signal twice."""
        if self._sending:
            self._again = True
            return
        self._sending = True
        try:
            self._again = True
            while self._again:
                self._again = False
                for child in list(self.children):
                    while child.signalled < len(self.asked):
                        sig = self.asked[child.signalled]
                        child.signalled += 1
                        if child.process.poll() is None:
                            child.process.send_signal(sig)
                        elif child.signalled == 1:
                            # died before the stop (a SIGKILL just before): judged as a crash
                            child.exited_before_stop = True
        finally:
            self._sending = False

    def stop_all(self, sig: int = signal.SIGTERM) -> None:
        self.restarts_due.clear()
        self.forward(sig, None)

    def run(self, processes: int) -> int:
        self.lifeline = Lifeline()
        try:
            for index in range(processes):
                self.children.append(self.start(index))
                self.send_owed()  # a stop that came while it was starting
            log.info("supervisor started %d workers: %s", processes, self.pids())
            while self.children or (self.restarts_due and not self.stopping):
                self.send_owed()
                for child in list(self.children):
                    self.check(child)
                self.restart_due()
                time.sleep(POLL_S)
        finally:
            self.lifeline.close()
        return self.worst

    def start(self, index: int) -> Child:
        restarts = (self.restarts, self.backoff.deaths)
        return Child.start(self.command, index, self.lifeline, restarts)

    def pids(self) -> list[int]:
        return [c.process.pid for c in self.children]

    def check(self, child: Child) -> None:
        if child.poll_ready():
            log.info("worker %d ready", child.process.pid)
        if child.became_stable():
            self.backoff.reset()
        # Read before the exit: a stop that arrives while the exit is handled (a SIGTERM during
        # the lease release below) must not turn a crash seen before it into a failed shutdown.
        stopping = self.stopping and not child.exited_before_stop
        code = child.process.poll()
        if code is None:
            return
        child.poll_ready()  # a line written just before exiting still counts
        self.children.remove(child)
        child.close()
        self.release_leases(child, code)
        self.exited(child, code, stopping)

    def release_leases(self, child: Child, code: int) -> None:
        """The leases the exited child's workers held, back to pending now (an outage or any
        error only logged: the leases then expire and the rescuers reclaim them, as before)."""
        if self.release is None or not child.workers:
            return
        try:
            released = self.release(child.workers)
        except Exception as exc:  # never let one cleanup stop the supervision of the rest
            log.warning(
                "worker %d exited (%d); could not release its leases (%s): they return to "
                "pending when they expire",
                child.process.pid,
                code,
                exc,
            )
            return
        if released:
            log.warning(
                "worker %d exited (%d): released its %d leased jobs back at once: %s",
                child.process.pid,
                code,
                len(released),
                released[:20],
            )

    def exited(self, child: Child, code: int, stopping: bool) -> None:
        """Judge an exit by whether the stop had been asked for when it was seen: after it,
        only an exit other than the forwarded signal's counts against the exit code; before
        it, a crash is restarted (unless the stop has come since), never counted."""
        pid = child.process.pid
        if stopping:
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
        elif code == 0:
            # it stopped as asked (a SIGTERM sent to it, not to the supervisor): no crash
            log.info(
                "worker %d stopped cleanly (exit code 0) though the supervisor did not ask; "
                "starting another in its place in %.0fs",
                pid,
                self.backoff.first_s,
            )
            self.restarts_due.append(time.monotonic() + self.backoff.first_s)
            self.free_indexes.append(child.index)
        else:
            delay = self.backoff.next_delay()
            self.restarts += 1
            log.error(
                "worker %d %s; restarting it in %.0fs (restart %d in a row)",
                pid,
                describe_exit(code),
                delay,
                self.backoff.deaths,
            )
            self.restarts_due.append(time.monotonic() + delay)
            self.free_indexes.append(child.index)

    def restart_due(self) -> None:
        now = time.monotonic()
        for due in [d for d in self.restarts_due if d <= now]:
            self.restarts_due.remove(due)
            if not self.stopping:
                index = self.free_indexes.pop(0) if self.free_indexes else 0
                child = self.start(index)
                self.children.append(child)
                self.send_owed()  # a stop that came while it was starting
                log.info("restarted a worker as %d", child.process.pid)


def supervise(argv: list[str], processes: int) -> int:
    """Run ``processes`` copies of this worker command line until they all exit."""
    supervisor = Supervisor(_child_argv(argv))
    signal.signal(signal.SIGTERM, supervisor.forward)
    signal.signal(signal.SIGINT, supervisor.forward)
    return supervisor.run(processes)
