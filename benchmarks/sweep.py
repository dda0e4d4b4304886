"""How W2's per-system settings were chosen: drain throughput over a grid of worker settings.

    .venv/bin/python -m benchmarks.sweep                    # every system's grid, 10,000 jobs
    .venv/bin/python -m benchmarks.sweep --systems skiplock --backend sqlite --runs 3

Prints jobs/s (first start -> last completion, median of the runs) for each setting; the best
one per system goes into ``SETTINGS`` in ``benchmarks/run.py``. Not part of ``make bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from .common import DEFAULT_PG_URL, find_postmaster
from .run import FULL, Bench, StepFailed, _drain_metrics, _prepare, _target

GRID: dict[str, list[dict[str, Any]]] = {
    "skiplock": [
        {"concurrency": c, "claim_batch": cb, "poll_interval_s": 0.05}
        for c, cb in [
            *((c, cb) for c in (10, 20, 50, 100, 200) for cb in (20, 50, 100) if cb <= max(c, 20)),
            (500, 500),
            (1000, 1000),
        ]
    ],
    "pgqueuer": [{"batch_size": bs, "pool": 10} for bs in (10, 25, 50, 100, 200, 500, 1000, 2000)],
    "procrastinate": [{"concurrency": c, "pool": 10} for c in (1, 5, 10, 20)],
    "seed-000": [{}],
}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sweep")
    p.add_argument("--systems", default=",".join(GRID))
    p.add_argument("--backend", default="postgres", choices=("postgres", "sqlite"))
    p.add_argument("--n", type=int, default=FULL["W2"]["n"])
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--url", default=DEFAULT_PG_URL)
    args = p.parse_args()
    b = Bench(
        pg_url=args.url,
        runs=args.runs,
        sizes=FULL,
        systems=(),
        sqlite=True,
        uvloop=False,
        stamp="sweep" + time.strftime("%H%M%S"),
    )
    b.postmaster = asyncio.run(find_postmaster(args.url))
    try:
        sweep(b, args)
    finally:
        b.cleanup()


def sweep(b: Bench, args: argparse.Namespace) -> None:
    for system in args.systems.split(","):
        for opts in GRID[system]:
            rates, other = [], 0.0
            for _ in range(args.runs):
                url, cleanup = _target(b, args.backend, f"sweep_{system}")
                try:
                    _prepare(b, system, args.backend, url, "noop", args.n)
                    r, t_spawn = b.child(b._spec("drain", system, url, opts=opts), "sweep")
                    m = _drain_metrics(r, t_spawn, args.n, args.backend)
                    rates.append(m["jobs_per_s"])
                    other = max(other, (m["other_cpu_s"] or 0.0) / m["seconds"])
                except StepFailed as exc:
                    print(f"{system} {opts}: failed: {exc}", flush=True)
                finally:
                    cleanup()
            if rates:
                noise = f"  (other load up to {other:.0%} of a core)" if other > 0.1 else ""
                print(f"{system} {opts}: {statistics.median(rates):,.0f} jobs/s{noise}", flush=True)


if __name__ == "__main__":
    main()
