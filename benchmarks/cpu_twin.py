"""W9twin: the CPU of W9's readers, replayed in PostgreSQL backends that read no skiplock table.

W9cpu, four processes spinning outside the database, is one control for the readers; it is not
their shape. A reader is a PostgreSQL backend that wakes every 100 ms and runs a query whose
cost grows with everything written since its snapshot, so it competes with the queue's own
backends for the same cores, with the same wake-ups, at a rising share. This control replays
exactly that: W9's run records each reader backend's CPU seconds at every round (from
``/proc/<pid>/stat``; the bench runs on the server's machine), and W9twin's sessions, in a run
of their own at the same rate, follow those curves, each round burning the CPU its reader had
used by then and not yet matched (``count(*)`` over ``generate_series``, calibrated per session)
in autocommit statements that hold no snapshot between them and take no lock on a skiplock
table. If the queue's claim p99 under W9twin is W9's, the readers cost the queue their CPU; the
difference between the two is what their snapshots and scans cost the storage.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import time
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")
BURN_SQL = "SELECT count(*) FROM generate_series(1, $1::bigint)"
CALIBRATE_ROWS = 2_000_000
MAX_BURN_S = 0.25
"""One statement burns at most this much CPU, so a session that fell behind catches up in rounds
100 ms apart, as a reader's queries come, not in one long statement."""
MIN_BURN_S = 0.002


def proc_stat(pid: int) -> list[str]:
    """``/proc/<pid>/stat``'s fields from the 3rd (state) on (the name before may hold spaces)."""
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    return data[data.rindex(")") + 2 :].split()


def backend_cpu(pid: int) -> float:
    """User+system CPU seconds of the process ``pid`` (a PostgreSQL backend), 0 once gone."""
    try:
        fields = proc_stat(pid)
    except (OSError, ValueError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def at(trace: list[tuple[float, float]], t: float) -> float:
    """The CPU seconds a trace of ``(seconds since start, CPU seconds)`` had used at ``t``,
    linear between its points."""
    if not trace:
        return 0.0
    times = [p[0] for p in trace]
    i = bisect.bisect_right(times, t)
    if i == 0:
        return trace[0][1] * (t / trace[0][0]) if trace[0][0] > 0 else trace[0][1]
    if i == len(trace):
        return trace[-1][1]
    (t0, c0), (t1, c1) = trace[i - 1], trace[i]
    return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)


async def twin_readers(
    url: str, seconds: float, traces: list[list[tuple[float, float]]], pause_s: float
) -> list[dict[str, Any]]:
    """One session per trace, for ``seconds``: each round burns what the trace had used by then
    and this session has not, then sleeps ``pause_s``. Returns, per session, its rounds, the
    CPU its backend used and the CPU its trace had used by the end."""
    import asyncpg

    started = time.monotonic()

    async def twin(trace: list[tuple[float, float]]) -> dict[str, Any]:
        conn = await asyncpg.connect(url)
        try:
            pid = await conn.fetchval("SELECT pg_backend_pid()")
            before = backend_cpu(pid)
            await conn.fetchval(BURN_SQL, CALIBRATE_ROWS)
            rows_per_s = CALIBRATE_ROWS / max(backend_cpu(pid) - before, 1.0 / _TICK)
            base = backend_cpu(pid)  # the calibration is not the trace's CPU
            rounds = 0
            while (t := time.monotonic() - started) < seconds:
                owed = at(trace, t) - (backend_cpu(pid) - base)
                if owed > MIN_BURN_S:
                    await conn.fetchval(BURN_SQL, int(min(owed, MAX_BURN_S) * rows_per_s))
                rounds += 1
                await asyncio.sleep(min(pause_s, max(0.0, seconds - (time.monotonic() - started))))
            return {
                "rounds": rounds,
                "cpu_s": round(backend_cpu(pid) - base, 1),
                "trace_cpu_s": round(at(trace, seconds), 1),
                "rows_per_cpu_s": round(rows_per_s),
            }
        finally:
            await conn.close()

    return list(await asyncio.gather(*(twin(trace) for trace in traces)))
