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

from .. import Worker
from .._app import App
from .._config import WorkerConfig
from .._service import Service, ServiceState
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


class _WorkerService(Service):
    """The in-process worker on the one lifecycle every background loop shares: detached
    (no TaskGroup in a web server's lifespan), ready with the worker, stopped by draining."""

    def __init__(self, worker: Worker) -> None:
        super().__init__()
        self.worker = worker
        self.name = f"skiplock worker {worker.name}"

    async def serve(self) -> None:
        ready = asyncio.ensure_future(self._mark_ready_with_the_worker())
        try:
            await self.worker.run()
        finally:
            ready.cancel()

    async def _mark_ready_with_the_worker(self) -> None:
        await self.worker.ready.wait()
        self.mark_ready()

    def stop(self) -> None:
        """Stop claiming and drain (the worker's own graceful stop), not a cancel."""
        self._stopped = True
        self.worker.request_stop()


@contextlib.asynccontextmanager
async def _in_process_worker(app: App, config: WorkerConfig) -> AsyncIterator[Worker]:
    """Run a Worker while the block runs: ready before it enters, drained when it leaves.
    A worker that dies is logged at once (the detached Service's contract) and its error
    fails the lifespan."""
    service = _WorkerService(Worker(app, config))
    service.on_error = _log_death
    await service.start_detached()
    if service.state is ServiceState.STOPPED:
        service.raise_error()
        raise RuntimeError(f"{service.name} stopped before it was ready")
    try:
        yield service.worker
    finally:
        service.stop()
        await service.join()
        service.raise_error()  # its error (if it died) fails the lifespan's shutdown


def _log_death(exc: BaseException) -> None:
    """Say what it means for the web process when its worker dies: its jobs stopped running."""
    log.error("in-process skiplock worker died; jobs will not run in this process")
