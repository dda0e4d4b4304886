"""One measured step in a fresh interpreter: ``python -m benchmarks.child SPEC_JSON``.

The orchestrator (``benchmarks/run.py``) starts one of these per step so that no system's
imports, pools or global settings leak into another's measurement, and so that "including
start-up" can be timed from the process's spawn. The last stdout line is ``RESULT {json}``;
the ``serve`` role also prints ``READY`` once its worker has been idle for a moment.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from .adapters import ADAPTERS, Adapter, NotSupported, fill
from .ceiling import CeilingAdapter
from .common import REC, machine_busy_seconds, now, pg_cpu_seconds

SETTLE_S = 0.5
"""How long a W4 worker idles (listening, polling) before the first job is sent."""


def _adapter(spec: dict[str, Any]) -> Adapter:
    system = spec["system"]
    cls = CeilingAdapter if system == CeilingAdapter.name else ADAPTERS[system]
    return cls(spec["url"], dict(spec.get("opts") or {}))


async def role_w1(spec: dict[str, Any]) -> dict[str, Any]:
    """W1: n enqueues one at a time (sequential awaits), then n through the bulk call."""
    a, n = _adapter(spec), spec["n"]
    await a.open()
    await a.install()
    out: dict[str, Any] = {}
    try:
        await a.enqueue("noop")  # warm-up: connection and prepared statement
        t0 = now()
        for _ in range(n):
            await a.enqueue("noop")
        out["single_s"] = now() - t0
        try:
            await a.enqueue_bulk("noop", 1)
            t0 = now()
            await a.enqueue_bulk("noop", n)
            out["bulk_s"] = now() - t0
        except NotSupported as exc:
            out["bulk_not_run"] = str(exc)
    finally:
        await a.close()
    return out


async def role_fill(spec: dict[str, Any]) -> dict[str, Any]:
    """Setup for W2/W3/W4/W5: install, then queue n jobs of one kind (none for n=0)."""
    a = _adapter(spec)
    await a.open()
    try:
        await a.install()
        if spec["n"]:
            await fill(a, spec["kind"], spec["n"])
    finally:
        await a.close()
    return {}


async def role_drain(spec: dict[str, Any]) -> dict[str, Any]:
    """W2/W3/W6: one worker drains the queue in burst mode; timings and CPU of the run."""
    a = _adapter(spec)
    postmaster = spec.get("postmaster")
    await a.open()
    try:
        box0, pg0 = machine_busy_seconds(), pg_cpu_seconds(postmaster)
        cpu0, t_run0 = time.process_time(), now()
        await a.work(burst=True)
        t_done = now()
        cpu1, pg1, box1 = time.process_time(), pg_cpu_seconds(postmaster), machine_busy_seconds()
    finally:
        await a.close()
    worker_cpu = cpu1 - cpu0
    restarted = pg0 is None or pg1 is None or pg1 < pg0  # the server was restarted meanwhile
    pg_cpu = None if restarted else pg1 - pg0
    return {
        "settings": a.settings(),
        "t_run0": t_run0,
        "t_first_start": REC.first_start,
        "t_last_end": REC.last_end,
        "t_done": t_done,
        "done": REC.done,
        "worker_cpu_s": worker_cpu,
        "pg_cpu_s": pg_cpu,
        # None when the server restarted meanwhile: its CPU cannot be told from the rest
        "other_cpu_s": None
        if postmaster and pg_cpu is None
        else max(0.0, (box1 - box0) - worker_cpu - (pg_cpu or 0.0)),
    }


async def _feed(a: Adapter, n: int, interval: float) -> dict[str, Any]:
    """Enqueue n ``mark`` jobs ``interval`` apart; when each call returned and how long it took."""
    await a.enqueue("mark", -1)  # warm-up, excluded from the figures
    await asyncio.sleep(0.2)
    returned: list[float] = []
    durations: list[float] = []
    base = now()
    for seq in range(n):
        delay = base + seq * interval - now()
        if delay > 0:
            await asyncio.sleep(delay)
        t0 = now()
        await a.enqueue("mark", seq)
        t1 = now()
        returned.append(t1)
        durations.append(t1 - t0)
    return {"returned": returned, "enqueue_s": durations}


async def _serve(a: Adapter, n: int, timeout: float) -> asyncio.Task[None]:
    loop = asyncio.get_running_loop()
    REC.expected = n + 1  # the warm-up job too

    def stop_soon() -> None:
        loop.call_soon(a.stop)

    REC.on_expected = stop_soon
    return asyncio.create_task(asyncio.wait_for(a.work(burst=False), timeout))


async def role_serve(spec: dict[str, Any]) -> dict[str, Any]:
    """W4 worker side: idle worker; stops after n+1 ``mark`` jobs; start time per sequence."""
    a = _adapter(spec)
    await a.open()
    try:
        work = await _serve(a, spec["n"], spec.get("timeout", 120))
        await asyncio.sleep(SETTLE_S)
        print("READY", flush=True)
        await work
    finally:
        await a.close()
    return {"starts": {str(k): v for k, v in REC.starts.items()}, "settings": a.settings()}


async def role_feed(spec: dict[str, Any]) -> dict[str, Any]:
    """W4 enqueue side (another process than the worker)."""
    a = _adapter(spec)
    await a.open()
    try:
        return await _feed(a, spec["n"], spec["interval"])
    finally:
        await a.close()


async def role_w4_inproc(spec: dict[str, Any]) -> dict[str, Any]:
    """W4 with the enqueuer and the worker in one process and one event loop."""
    a = _adapter(spec)
    await a.open()
    try:
        work = await _serve(a, spec["n"], spec.get("timeout", 120))
        await asyncio.sleep(SETTLE_S)
        fed = await _feed(a, spec["n"], spec["interval"])
        await work
    finally:
        await a.close()
    return {**fed, "starts": {str(k): v for k, v in REC.starts.items()}, "settings": a.settings()}


async def role_roundtrip(spec: dict[str, Any]) -> dict[str, Any]:
    """W7 producer side (another process than the worker): enqueue and await outcomes."""
    a = _adapter(spec)
    await a.open()
    try:
        return await a.roundtrip(spec["n"])
    finally:
        await a.close()


HISTORY_SQL = """
INSERT INTO skiplock_jobs (queue, task, args, kwargs, state, priority, attempt, max_attempts,
                           run_at, created_at, attempted_at, finished_at)
SELECT 'default', 'noop', '[]', '{}', 'succeeded', 0, 1, 5,
       now() - make_interval(secs => g), now() - make_interval(secs => g),
       now() - make_interval(secs => g), now() - make_interval(secs => g)
FROM generate_series(1, $1) AS g
"""


async def role_w6_prep(spec: dict[str, Any]) -> dict[str, Any]:
    """W6 setup and claim latency: history rows, VACUUM ANALYZE, timed claims, then fill."""
    import asyncpg

    from skiplock._backends.params import ClaimParams

    a = _adapter(spec)
    await a.open()
    conn = await asyncpg.connect(spec["url"])
    try:
        await a.install()
        if spec["history"]:
            await conn.execute(HISTORY_SQL, spec["history"])
        await conn.execute("VACUUM ANALYZE skiplock_jobs")
        claims, batch = spec["claims"], spec["claim_batch"]
        await a.enqueue_bulk("noop", claims * batch)
        backend = await a.app.backend()  # type: ignore[attr-defined]  # skiplock's adapter
        latencies = []
        for i in range(claims):
            params = ClaimParams(None, batch, "bench", f"bench:{i}", 300.0, 30.0)
            t0 = now()
            got = await backend.job_get_available(params)
            latencies.append(now() - t0)
            assert len(got) == batch, f"claimed {len(got)} of {batch}"
        await conn.execute(
            "UPDATE skiplock_jobs SET state='succeeded', finished_at=now(), lease_token=NULL,"
            " lease_expires_at=NULL WHERE state='running'"
        )
        await fill(a, "noop", spec["n"])
    finally:
        await conn.close()
        await a.close()
    return {"claim_s": latencies}


ROLES = {
    "w1": role_w1,
    "fill": role_fill,
    "drain": role_drain,
    "serve": role_serve,
    "feed": role_feed,
    "w4_inproc": role_w4_inproc,
    "w6_prep": role_w6_prep,
    "roundtrip": role_roundtrip,
}


def main() -> None:
    spec = json.loads(sys.argv[1])
    coro = ROLES[spec["role"]](spec)
    if spec.get("uvloop"):
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            result = runner.run(coro)
    else:
        result = asyncio.run(coro)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
