"""A Starlette / FastAPI lifespan that opens skiplock with the web app and closes it after.

``FastAPI(lifespan=skiplock_lifespan(app))`` opens the app's backend at startup (so a wrong URL
or a schema not migrated fails the deploy, not the first request) and closes it at shutdown.
``worker=True`` (or a ``WorkerConfig``) also runs a Worker inside the web process, for small
deployments: the server's shutdown stops it claiming and drains its jobs within the worker's
``shutdown_timeout_s`` before the lifespan returns and the server exits. A worker that dies is
never silent: it is logged at once, and its error fails the lifespan (startup or shutdown).

It needs nothing of Starlette's at import: a lifespan is any callable taking the web app and
returning an async context manager, so one helper serves both frameworks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from .._app import App
from .._config import WorkerConfig
from .._worker.worker import Worker
from ..errors import ConfigurationError

log = logging.getLogger("skiplock.contrib.starlette")

Lifespan = Callable[[Any], AbstractAsyncContextManager[None]]


def skiplock_lifespan(app: App, *, worker: bool | WorkerConfig = False) -> Lifespan:
    """A lifespan for ``Starlette(lifespan=...)`` / ``FastAPI(lifespan=...)``.

    ``worker``: False (default) only opens and closes the backend; True runs a Worker with
    default options in the web process; a ``WorkerConfig`` runs one with those options.
    """
    if not isinstance(app, App):
        raise ConfigurationError(f"skiplock_lifespan: app must be a skiplock.App, not {app!r}")
    if not isinstance(worker, bool | WorkerConfig):
        raise ConfigurationError(
            f"skiplock_lifespan: worker must be a bool or a WorkerConfig, not {worker!r}"
        )
    config = WorkerConfig() if worker is True else (worker or None)

    @contextlib.asynccontextmanager
    async def lifespan(web_app: Any) -> AsyncIterator[None]:
        try:
            await app.check_schema()  # opens the backend; an unmigrated database fails here
            if config is None:
                yield
            else:
                async with _in_process_worker(app, config) as running:
                    web_app.state.skiplock_worker = running  # for a health endpoint
                    yield
        finally:
            await app.close()

    return lifespan


@contextlib.asynccontextmanager
async def _in_process_worker(app: App, config: WorkerConfig) -> AsyncIterator[Worker]:
    """Run a Worker while the block runs: ready before it enters, drained when it leaves."""
    worker = Worker(app, config)
    task = asyncio.create_task(worker.run(), name=f"skiplock worker {worker.name}")
    task.add_done_callback(_log_death)
    await _until_ready(worker, task)
    try:
        yield worker
    finally:
        worker.request_stop()
        await task  # its error (if it died) fails the lifespan's shutdown


async def _until_ready(worker: Worker, task: asyncio.Task[None]) -> None:
    """Wait for every service to be ready, or raise what the worker died of."""
    ready = asyncio.create_task(worker.ready.wait())
    try:
        await asyncio.wait({ready, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ready.cancel()
    if task.done():
        task.result()  # re-raises the worker's error
        raise RuntimeError(f"skiplock worker {worker.name} stopped before it was ready")


def _log_death(task: asyncio.Task[None]) -> None:
    """Log a worker that died while the server kept serving: its jobs have stopped running."""
    if not task.cancelled() and task.exception() is not None:
        log.error(
            "in-process skiplock worker died; jobs will not run in this process",
            exc_info=task.exception(),
        )
