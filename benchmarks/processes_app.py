"""The app W18 (benchmarks/processes.py) runs through the CLI worker.

    SKIPLOCK_DATABASE_URL=postgresql://... skiplock worker benchmarks.processes_app:app \\
        --concurrency 2 --log-level warning

Each task comes twice: on the worker's thread pool (``executor="thread"``) and in a child
process of its pool (``executor="process"``, the ``_p`` names). A measured job returns
``[n, started, ended, pid]`` as its result, its times on ``CLOCK_MONOTONIC``
(benchmarks/common.py: one clock for every process of the machine, the children's too). The
warm-up jobs wait until every slot is up (``rendezvous`` on the directory
``SKIPLOCK_BENCH_W18_DIR`` names), so the measured jobs start with every thread or child
running; the bench writes them at a higher priority, so they are claimed first.
"""

from __future__ import annotations

import os

import skiplock
from benchmarks.common import now, rendezvous, spin_cpu

DIR_ENV = "SKIPLOCK_BENCH_W18_DIR"

app = skiplock.App()


def _warm(parties: int) -> None:
    rendezvous(os.environ[DIR_ENV], parties)


def _noop(n: int) -> list[float]:
    t = now()
    return [n, t, now(), os.getpid()]


def _burn(n: int, ms: float) -> list[float]:
    t = now()
    spin_cpu(ms / 1000)
    return [n, t, now(), os.getpid()]


@app.task(name="warm", executor="thread")
def warm(parties: int) -> None:
    _warm(parties)


@app.task(name="noop", executor="thread")
def noop(n: int) -> list[float]:
    return _noop(n)


@app.task(name="burn", executor="thread")
def burn(n: int, ms: float) -> list[float]:
    return _burn(n, ms)


@app.task(name="warm_p", executor="process")
def warm_p(parties: int) -> None:
    _warm(parties)


@app.task(name="noop_p", executor="process")
def noop_p(n: int) -> list[float]:
    return _noop(n)


@app.task(name="burn_p", executor="process")
def burn_p(n: int, ms: float) -> list[float]:
    return _burn(n, ms)
