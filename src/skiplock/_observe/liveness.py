"""Whether a worker in the live-worker registry is alive, told two ways:

- **its own silence limit**: each row carries ``gone_after_s``, the silence after which its
  worker counts as gone (``gone_after(interval)``: a few of *its* beats, never under
  GONE_AFTER_MIN_S), so a reader on another machine with another beat interval judges it by
  the row's own rule; and
- **on this machine, its process**: each row carries ``process``, which OS process beat it
  (``this_process()``: boot id, pid namespace, pid, start time). A reader in the same pid
  space (same kernel boot, same pid namespace) looks the pid up in ``/proc``: absent, a
  zombie, or started at another time (the pid reused) means the worker is gone, at once. A
  reader anywhere else (another host, another container: another boot id or namespace, so
  two containers' pid 1 are never confused) cannot tell and leaves it to the silence limit.
  Where there is no ``/proc`` (macOS), ``process`` is None and only the silence limit counts.

It also carries what a ``--processes`` supervisor tells a child about the crashes before it
(``restarts_from_supervisor``): the registry shows restarts, and ``skiplock health`` turns red
on a crash loop.
"""

from __future__ import annotations

import math
import os
from functools import cache

from .._job import WorkerInfo

GONE_AFTER_BEATS = 3
"""Beats a worker may miss before its registry row counts as gone."""
GONE_AFTER_MIN_S = 10.0
"""The least silence that counts as gone, whatever the beat interval: a blocked event loop,
a garbage collection or a slow write must not make a live worker's jobs run twice."""

RESTARTS_ENV = "SKIPLOCK_RESTARTS"
"""Set by a ``--processes`` supervisor for each child: ``"<restarts> <in a row>"``, how often
it restarted a crashed child before this one, in all and since a child last stayed up
STABLE_S (its backoff's count of deaths in a row)."""
STABLE_S = 60.0
"""A supervised child up this long after it was ready ends a run of crashes (the supervisor's
backoff starts again from 1 s, and the child's registry row reports no restarts in a row)."""
CRASH_LOOP_RESTARTS = 3
"""Restarts in a row after crashes that ``skiplock health`` calls a crash loop (its
``--max-restarts`` default)."""


def gone_after(interval_s: float) -> float:
    """The silence after which a worker beating every ``interval_s`` counts as gone."""
    return max(GONE_AFTER_BEATS * interval_s, GONE_AFTER_MIN_S)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _stat(pid: int | str) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of a process in this pid namespace's
    ``/proc``; None if there is no such process."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    # "pid (comm) state ppid ..." where comm may hold spaces and parentheses: split after it
    fields = text[text.rfind(")") + 2 :].split()
    if len(fields) < 20:
        return None
    return fields[0], fields[19]  # field 3 (state) and field 22 (starttime)


@cache
def _pid_space() -> str | None:
    """This kernel boot and pid namespace, or None where /proc cannot say (not Linux)."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    if not boot:
        return None
    return f"{boot.strip()}/{namespace}"


def this_process() -> str | None:
    """This process as the registry records it: ``<boot id>/<pid namespace>/<pid>/<start>``
    (None where /proc cannot say). Not cached whole: a forked child has its own pid."""
    space = _pid_space()
    stat = _stat("self")
    if space is None or stat is None:
        return None
    return f"{space}/{os.getpid()}/{stat[1]}"


def process_gone(process: str | None) -> bool:
    """True only when ``process`` (a ``this_process()`` value) ran in this pid space and is
    gone: no such pid, a zombie, or the pid now belongs to a process started at another
    time. False whenever this process cannot tell (another machine or container, no /proc)."""
    if not process:
        return False
    space, _, rest = process.rpartition("/")  # rest: the start time
    space, _, pid = space.rpartition("/")
    if not pid.isdigit() or space != _pid_space():
        return False
    stat = _stat(pid)
    return stat is None or stat[0] in ("Z", "X") or stat[1] != rest


def dead_reason(worker: WorkerInfo, answered_for_s: float = math.inf) -> str | None:
    """Why ``worker``'s row belongs to a dead worker, or None if it may be alive.

    ``answered_for_s``: how long the database has answered the caller's own beats without a
    break. A silence counts only if the caller could have seen the worker beat all that time:
    after an outage every row is silent, and the first worker back must not take the others'
    jobs before they had a chance to beat again."""
    if process_gone(worker.process):
        return "exited (its process is gone)"
    limit = worker.gone_after_s
    if limit is not None and worker.silent_s > limit and answered_for_s >= limit:
        return f"stopped beating (silent {worker.silent_s:.0f}s, past its {limit:g}s)"
    return None


def restarts_in_a_row(restarts: int, up_s: float) -> int:
    """What a supervised child reports of its crashes in a row, ``up_s`` after it started:
    none once it has stayed up STABLE_S (its supervisor forgets them then too)."""
    return 0 if up_s >= STABLE_S else restarts


_restarts: list[tuple[int, int]] = []


def restarts_from_supervisor() -> tuple[int, int]:
    """(restarts, in a row) before this process, as its supervisor set them (0, 0 without
    one). Read once and removed from the environment: a process a job starts is not the
    supervisor's child."""
    if not _restarts:
        words = os.environ.pop(RESTARTS_ENV, "").split()
        numbers = [int(w) for w in words if w.isdigit()]
        _restarts.append((numbers[0], numbers[1]) if len(numbers) == 2 else (0, 0))
    return _restarts[0]
