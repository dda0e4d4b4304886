"""Run skiplock's own Worker on a SkiplockBackend from Django (``manage.py concurrent_worker``).

The options are django-tasks-concurrent's (concurrency, interval, queue names, backend alias,
shutdown timeout); they are checked here, at the edge, with an error naming the option and what
is valid, then mapped onto ``WorkerConfig``: there is no second worker.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence

from ..._config import WorkerConfig
from ..._worker.worker import Worker


class WorkerOptionError(ValueError):
    """A worker option a user passed is not valid; the message names it and what is valid."""


def _backend(alias: str) -> object:
    from django.tasks import task_backends

    from .backend import SkiplockBackend

    valid = sorted(task_backends)
    if alias not in valid:
        raise WorkerOptionError(f"--backend: unknown backend {alias!r} (valid: {', '.join(valid)})")
    backend = task_backends[alias]
    if not isinstance(backend, SkiplockBackend):
        raise WorkerOptionError(f"--backend: {alias!r} is not a SkiplockBackend")
    return backend


def _queues(backend: object, names: Sequence[str] | None) -> tuple[str, ...] | None:
    if not names or "*" in names:
        return None
    allowed = list(getattr(backend, "queues", ()) or ())
    unknown = [n for n in names if allowed and n not in allowed]
    if unknown:
        raise WorkerOptionError(
            f"--queue-name: unknown queue {unknown[0]!r} (valid: {', '.join(sorted(allowed))}, *)"
        )
    return tuple(names)


def build_config(
    *,
    backend: object,
    concurrency: int,
    interval: float,
    queue_names: Sequence[str] | None,
    shutdown_timeout: float,
    scheduler: bool,
) -> WorkerConfig:
    """The WorkerConfig of these options, or a WorkerOptionError naming the bad one."""
    if concurrency < 1:
        raise WorkerOptionError(f"--concurrency must be at least 1 (got {concurrency})")
    if interval <= 0:
        raise WorkerOptionError(f"--interval must be a positive number of seconds (got {interval})")
    if shutdown_timeout < 0:
        raise WorkerOptionError(f"--shutdown-timeout must be >= 0 (got {shutdown_timeout})")
    return WorkerConfig(
        queues=_queues(backend, queue_names),
        concurrency=concurrency,
        poll_interval_s=interval,
        shutdown_timeout_s=shutdown_timeout,
        scheduler=scheduler,
    )


async def run_worker_async(
    backend_alias: str = "default",
    *,
    concurrency: int = 10,
    interval: float = 1.0,
    queue_names: Sequence[str] | None = None,
    shutdown_timeout: float = 30.0,
    scheduler: bool = True,
    burst: bool = False,
) -> None:
    """Work the backend's jobs on this loop until SIGTERM/SIGINT (a second one skips the
    drain) or, with ``burst``, until nothing is ready."""
    backend = _backend(backend_alias)
    config = build_config(
        backend=backend,
        concurrency=concurrency,
        interval=interval,
        queue_names=queue_names,
        shutdown_timeout=shutdown_timeout,
        scheduler=scheduler,
    )
    if scheduler:
        from .periodic_tasks import attach_periodic_tasks

        attach_periodic_tasks(backend)
    worker = Worker(backend.app, config)  # type: ignore[attr-defined]
    loop = asyncio.get_running_loop()
    if not _RUNNING:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, _stop_all)
    _RUNNING.add(worker)
    try:
        await worker.run(burst=burst)
    finally:
        _RUNNING.discard(worker)
        if not _RUNNING:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)


_RUNNING: set[Worker] = set()
"""Workers run_worker_async runs on this process's loop: one signal stops them all."""


def _stop_all() -> None:
    for worker in list(_RUNNING):
        worker.request_stop()


def run_worker(backend_alias: str = "default", **options: object) -> None:
    """``run_worker_async`` on a loop of its own (the management command's entry)."""
    asyncio.run(run_worker_async(backend_alias, **options))  # type: ignore[arg-type]
