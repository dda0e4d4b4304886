"""Celery's side of W18 (benchmarks/processes.py): the same tasks on its prefork pool.

    SKIPLOCK_BENCH_CELERY_BROKER=redis://127.0.0.1:6379/9 SKIPLOCK_BENCH_CELERY_QUEUE=w18 \\
        celery -A benchmarks.celery_app worker -c 2 --loglevel warning

The broker is Redis (``SKIPLOCK_BENCH_CELERY_BROKER``), the queue one of the run's own
(``SKIPLOCK_BENCH_CELERY_QUEUE``), and there is no result backend: Celery's defaults but for
those. A measured task appends ``[n, started, ended, pid]`` to the Redis list
``<queue>:done`` (one RPUSH, after its end is read), its times on ``CLOCK_MONOTONIC`` as
skiplock's tasks record them; the bench counts the list to see every job ran once. The warm-up
tasks wait until every pool process is up, as benchmarks/processes_app.py's do.
"""

from __future__ import annotations

import json
import os
from typing import Any

from celery import Celery

from benchmarks.common import now, rendezvous, spin_cpu

BROKER_ENV = "SKIPLOCK_BENCH_CELERY_BROKER"
QUEUE_ENV = "SKIPLOCK_BENCH_CELERY_QUEUE"
DIR_ENV = "SKIPLOCK_BENCH_W18_DIR"
DEFAULT_BROKER = "redis://127.0.0.1:6379/9"

BROKER = os.environ.get(BROKER_ENV, DEFAULT_BROKER)
QUEUE = os.environ.get(QUEUE_ENV, "w18")

app = Celery("w18", broker=BROKER)
app.conf.task_default_queue = QUEUE
app.conf.broker_connection_retry_on_startup = True  # the default, said (a warning otherwise)

_redis: Any = None


def _record(n: int, started: float, ended: float) -> None:
    global _redis
    if _redis is None:  # in the pool process, after the fork
        import redis

        _redis = redis.Redis.from_url(BROKER)
    _redis.rpush(f"{QUEUE}:done", json.dumps([n, started, ended, os.getpid()]))


@app.task(name="warm")
def warm(parties: int) -> None:
    rendezvous(os.environ[DIR_ENV], parties)


@app.task(name="noop")
def noop(n: int) -> None:
    t = now()
    _record(n, t, now())


@app.task(name="burn")
def burn(n: int, ms: float) -> None:
    t = now()
    spin_cpu(ms / 1000)
    _record(n, t, now())
