"""Real worker processes for the Django tests: ``python -m django <command>`` on the test
project, its output kept in a file shown when a test fails, always killed at teardown."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float = 20.0, what: str = "condition") -> T:
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` at the end."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


@dataclass
class Spawned:
    """One spawned command and the file its stdout/stderr go to."""

    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        self.process.send_signal(sig)

    def wait(self, timeout: float = 20.0) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"pid {self.pid} still running; output:\n{self.output()}"
            ) from None

    def children(self) -> list[int]:
        """PIDs of this process's direct children (Linux /proc)."""
        path = Path(f"/proc/{self.pid}/task/{self.pid}/children")
        try:
            return [int(p) for p in path.read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            return []


@dataclass
class WorkerProcesses:
    spawned: list[Spawned] = field(default_factory=list)

    def start(self, *args: str, env: dict[str, str] | None = None) -> Spawned:
        """``python -m django ARGS`` with this test run's settings (and ``env`` on top)."""
        log = Path(tempfile.mkstemp(prefix="skiplock-django-worker-", suffix=".log")[1])
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "django", *args],
                cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: teardown kills its children too
            )
        spawned = Spawned(process, log)
        self.spawned.append(spawned)
        return spawned

    def kill_all(self) -> None:
        """SIGKILL each spawned process group (a supervisor's children too), exited or not."""
        for spawned in self.spawned:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(spawned.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                spawned.process.wait(10)
