"""What the orchestrator and the measured child processes share: clock, CPU, statistics."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def now() -> float:
    """CLOCK_MONOTONIC: one system-wide clock on Linux, so two processes' readings compare."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def with_database(url: str, database: str) -> str:
    """The same PostgreSQL URL pointing at another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def pg_cpu_seconds(postmaster_pid: int | None) -> float | None:
    """User+system CPU of the whole PostgreSQL server so far: postmaster, live children, and
    (through the postmaster's children times) every backend that has already exited."""
    if not postmaster_pid:
        return None
    import psutil

    try:
        master = psutil.Process(postmaster_pid)
        t = master.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for child in master.children():
            try:
                c = child.cpu_times()
            except psutil.Error:
                continue  # exited between listing and reading: now in children_* instead
            total += c.user + c.system
        return float(total)
    except psutil.Error:
        return None


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolation percentile (p in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


@dataclass
class Recorder:
    """What the benchmark job functions write into: first start, last end, starts by sequence."""

    first_start: float | None = None
    last_end: float | None = None
    done: int = 0
    expected: int | None = None
    starts: dict[int, float] = field(default_factory=dict)
    on_expected: Callable[[], None] | None = None
    first_cpu: float | None = None

    def start(self, seq: int | None = None) -> None:
        t = now()
        if self.first_start is None:
            self.first_start = t
            self.first_cpu = time.process_time()
        if seq is not None:
            self.starts[seq] = t

    def end(self) -> None:
        self.last_end = now()
        self.done += 1
        if self.expected is not None and self.done == self.expected and self.on_expected:
            self.on_expected()

    def reset(self) -> None:
        self.first_start = self.last_end = self.first_cpu = None
        self.done = 0
        self.starts.clear()


REC = Recorder()
"""The one recorder of a child process; every adapter's job functions write here."""


def summarize(values: Sequence[float]) -> dict[str, float] | None:
    """Median, min and max of one figure over runs (None when no run produced it)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def env_for_child() -> dict[str, str]:
    """The child's environment: quiet Python, no accidental inherited skiplock URL."""
    env = dict(os.environ)
    env.pop("SKIPLOCK_DATABASE_URL", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def find_postmaster(url: str) -> int | None:
    """The PostgreSQL server's main process id, when it runs on this machine (else None)."""
    import asyncpg
    import psutil

    conn = await asyncpg.connect(url)
    try:
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        try:
            return int(psutil.Process(backend).ppid()) or None
        except psutil.Error:
            return None  # a server in another PID namespace or on another host
    finally:
        await conn.close()


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (all cores, every process) since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def wait_quiet(max_wait: float, threshold: float = 0.15, window: float = 0.3) -> bool:
    """Wait (at most ``max_wait`` s) until the machine is idle: under ``threshold`` of all
    cores busy over ``window`` s. False if it never was (the run goes ahead, marked noisy)."""
    cores = os.cpu_count() or 1
    deadline = time.monotonic() + max_wait
    while True:
        b0 = machine_busy_seconds()
        time.sleep(window)
        if (machine_busy_seconds() - b0) / (window * cores) < threshold:
            return True
        if time.monotonic() >= deadline:
            return False


def spin_cpu(seconds: float) -> None:
    """Pure-Python work until this thread has used ``seconds`` of CPU (``time.thread_time``):
    the same work on a loaded machine, and a thread waiting for the GIL spends none of it."""
    deadline = time.thread_time() + seconds
    x = 0
    while time.thread_time() < deadline:
        for i in range(200):
            x = (x * 31 + i) & 0xFFFF


def rendezvous(directory: str, parties: int, timeout: float = 120.0) -> None:
    """Wait until ``parties`` distinct threads (any process) have called this on ``directory``:
    each writes a file named after its process and thread, then polls the count (5 ms). A
    benchmark's warm-up jobs call it, so the measured jobs start once every slot is up."""
    name = f"{os.getpid()}-{threading.get_ident()}"
    with open(os.path.join(directory, name), "w"):
        pass
    deadline = time.monotonic() + timeout
    while len(os.listdir(directory)) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(os.listdir(directory))} of {parties} slots came up")
        time.sleep(0.005)
