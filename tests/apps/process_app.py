"""Sync tasks run in child processes (issue 47, ``executor="process"``): module-level, as a
child imports them by module and name. Each records what it did where the test can count it:
its own result (the child's pid) and, for the ones that must not outlive their timeout, a file
written only if the code ran on past it."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import skiplock
from skiplock import current_job

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test

_kept: list[bytes] = []
"""What ``leak`` holds on to for the child's life: its resident memory grows with it."""


def _late_mark(mark: str) -> None:
    """The proof a timed-out attempt's code ran on: a file written after its timeout, whole
    (written aside, then renamed: a test that sees it exist reads its pid, never the empty
    file ``write_text`` opens first, as one did under load)."""
    if mark:
        aside = Path(f"{mark}.writing")
        aside.write_text(str(os.getpid()))
        os.replace(aside, mark)


NO_WAIT = skiplock.RetryPolicy(base_s=0.001, jitter=False)
"""Retries due at once: a burst worker sees the second attempt."""


@app.task(executor="process", timeout=0.5, max_attempts=2, retry=NO_WAIT)
def spin(mark: str = "") -> int:
    """Pure Python, never yielding: only a signal stops it."""
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        pass
    _late_mark(mark)
    return os.getpid()


@app.task(executor="process", timeout=0.5, max_attempts=2, retry=NO_WAIT)
def c_sleep(mark: str = "") -> int:
    """A blocking C call (libc's sleep through ctypes) that outlives its timeout."""
    ctypes.CDLL(None).sleep(3)
    _late_mark(mark)
    return os.getpid()


@app.task(timeout=0.5, max_attempts=1)
def thread_spin(mark: str = "", release: str = "") -> int:
    """The same busy loop on a thread (the old behaviour, the contrast): it cannot be killed.
    It spins until the file ``release`` exists (60 s at most), so the test decides when it
    ends, after the outcome is in the table, however slow the machine."""
    end = time.monotonic() + 60.0
    while time.monotonic() < end and not (release and os.path.exists(release)):
        pass
    _late_mark(mark)
    return os.getpid()


@app.task(executor="process")
def whoami() -> int:
    """The pid of the child that ran it."""
    return os.getpid()


@app.task(executor="process")
def leak(mib: int) -> int:
    """Keeps ``mib`` MiB for the child's life (touched, so it is resident)."""
    _kept.append(b"x" * (mib * 2**20))
    return os.getpid()


@app.task(executor="process", max_attempts=1)
def die(how: str) -> None:
    """Ends its own process: ``exit`` (os._exit(3)), ``kill`` (SIGKILL), ``segfault``."""
    if how == "exit":
        os._exit(3)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    ctypes.string_at(0)  # reads address 0: SIGSEGV


@app.task(executor="process", max_attempts=1)
def fails(message: str) -> None:
    raise ValueError(message)


class Unpicklable(Exception):
    def __init__(self, a: str, b: str) -> None:
        super().__init__(f"{a}/{b}")


@app.task(executor="process", max_attempts=1)
def fails_oddly() -> None:
    raise Unpicklable("one", "two")


@app.task(executor="process")
def knows_itself(n: int) -> dict[str, object]:
    """current_job(), progress and a durable step, from the child."""
    job = current_job()
    job.set_progress_sync(0.5, "half way")
    stepped = job.step_sync("double", lambda: n * 2)
    return {"id": job.id, "attempt": job.attempt, "step": stepped, "pid": os.getpid()}


@app.task
def on_thread() -> int:
    return os.getpid()


@app.task
def nap(seconds: float, started: str = "") -> int:
    """A plain sync task (no executor of its own): where it runs is the worker's choice.
    ``started``: a file it writes as its code starts (a test's event)."""
    if started:
        Path(started).write_text(str(os.getpid()))
    time.sleep(seconds)
    return os.getpid()


@app.task(executor="process")
def waits_for_go() -> dict[str, object]:
    """Parks on the signal "go" from the child, then (a new attempt) returns its payload."""
    payload = current_job().wait_for_sync("go", timeout=60)
    return {"got": payload, "pid": os.getpid()}


@dataclasses.dataclass
class Point:
    x: int
    y: int


@app.task(executor="process")
def moved(p: Point, by: int) -> Point:
    """Typed arguments and result cross as JSON and are rebuilt in the child."""
    assert isinstance(p, Point), type(p)
    return Point(p.x + by, p.y + by)


@app.task(executor="process", max_attempts=3)
def unstorable() -> object:
    return {1, 2}  # a set: no JSON for it


EFFECTS = "process_effects"
"""The table ``effect`` writes its one row per attempt that got that far to: the database's own
record of what ran, counted by the exactly-once test."""


def effect_connection(url: str) -> Any:
    """A plain DB-API connection to the test's own database (not skiplock's), in the schema
    the URL names: the test makes and counts the table through it too."""
    if url.startswith("sqlite:///"):
        return sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
    import psycopg

    base, _, query = url.partition("?")
    schema = dict(p.split("=", 1) for p in query.split("&") if p).get("schema", "public")
    return psycopg.connect(base, options=f"-c search_path={schema}")


EFFECT_TIMEOUT_S = 5.0
"""The effect task's timeout: past what an attempt that does not spin takes on a loaded machine
(its child imports the driver and connects; at 1 s an ``ok`` attempt was once killed too)."""


@app.task(executor="process", timeout=EFFECT_TIMEOUT_S, max_attempts=2, retry=NO_WAIT)
def effect(url: str, plan: str) -> int:
    """Writes one row per attempt that reaches its end. ``plan`` says what its first attempt
    does before that: ``ok`` nothing; ``spin`` runs pure Python past its timeout (a child not
    killed would write its row late, a second one); ``exit``, ``kill``, ``segfault`` end the
    child; ``leak`` keeps 60 MiB (the worker's memory bound recycles the child)."""
    job = current_job()
    if job.attempt == 1:
        if plan == "spin":
            end = time.monotonic() + EFFECT_TIMEOUT_S + 3.0
            while time.monotonic() < end:
                pass
        elif plan == "exit":
            os._exit(3)
        elif plan == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif plan == "segfault":
            ctypes.string_at(0)
        elif plan == "leak":
            _kept.append(b"x" * (60 * 2**20))
    conn = effect_connection(url)
    mark = "?" if isinstance(conn, sqlite3.Connection) else "%s"
    try:
        with conn:
            conn.execute(
                f"INSERT INTO {EFFECTS} VALUES ({mark}, {mark}, {mark})",
                (str(job.id), job.attempt, os.getpid()),
            )
    finally:
        conn.close()
    return os.getpid()
