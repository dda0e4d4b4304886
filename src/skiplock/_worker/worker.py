"""``Worker``: one asyncio TaskGroup of services that claim, run and record jobs.

    producer ──claims──> runner (executor: a task per job) ──outcomes──> completer ──> backend
       ^
       └── wake-ups: notifier (LISTEN/NOTIFY), in-process enqueues, the poll backstop
    lease keeper: heartbeats every lease held    rescuer: reclaims leases that expired anywhere,
                                                 and those of workers the registry shows dead
    canceller: cancels jobs a person asked to    pruner: deletes rows past their retention
    watchdog: names a task that blocks the event loop, and the lease it endangers
    scheduler: enqueues cron slots (when the app has schedules)
    presence: keeps this worker's row in the live-worker registry (``app.workers()``)

The worker and its services get the app's ``Registry`` (tasks, schedules, tracing, clock, the
in-process wake-ups) and the backend, never the App: ``Worker(registry, backend, config)``
runs on an open backend; ``Worker(app, config)`` builds on it, waiting for the app's database
first.

Every service has one lifecycle (``_service.Service``: start, ready, stop) and lives in the
worker's TaskGroup. If any of them dies the TaskGroup cancels the rest and ``run`` raises: a
worker that has quietly stopped consuming is worse than one that exits loudly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol, Unpack, overload

from .. import _schema
from .._app_databases import Databases
from .._app_observe import Observe
from .._backends import Backend
from .._config import WorkerConfig, WorkerOptions
from .._lanes import Directory
from .._observe.gauges import GaugeCache, Gauges
from .._observe.http import HttpEndpoint, Response, Route
from .._observe.meter import Meter
from .._observe.plugins import MetricsExporter, default_metrics_exporter
from .._observe.presence import Presence
from .._observe.summary import LogSummary
from .._outage import Outage
from .._registry import Registry
from .._schedule import Schedule
from .._service import Service
from .._url import mask_url
from ..errors import BackendError
from .breaker import Breakers
from .claim_window import ClaimWindow
from .completer import Completer
from .dead_workers import DeadWorkers
from .leases import LeaseKeeper
from .ledger import Ledger
from .producer import Producer
from .report import report_worker
from .runner import Runner
from .scheduler import Scheduler
from .services import Canceller, Checkpointer, Notifier, Pruner, Rescuer, Vacuumer
from .signals import WorkerSignals
from .wait_timer import WaitTimer
from .watchdog import Watchdog

log = logging.getLogger("skiplock.worker")

FINAL_WRITE_S = 1.0
"""At least this long for the last outcomes once stopping, even when the grace period is
spent: a healthy database writes them in milliseconds."""


class WorkerApp(Protocol):
    """What ``Worker(app)`` uses of an app (``App`` is one): its registry, and its database
    once it answers with a current schema."""

    @property
    def registry(self) -> Registry: ...

    async def wait_for_database(
        self, stopping: asyncio.Event | None = None, *, database: str = ...
    ) -> bool: ...

    async def backend(self, *, create: bool = ..., database: str = ...) -> Backend: ...

    def owner_of(self, schedule: Schedule) -> str: ...

    @property
    def directory(self) -> Directory: ...


Connect = Callable[[asyncio.Event], Awaitable[Backend | None]]
"""How a worker gets its open backend once the schema is current (None: stopped first)."""


class Worker:
    """Runs an App's jobs. ``await Worker(app).run()`` until ``request_stop()``.

    Options come as a ``WorkerConfig``, or as its fields by keyword
    (``Worker(app, concurrency=20)``), or both (the keywords win).
    ``Worker(app.registry, backend, config)`` runs the same worker on a backend the caller
    opened (and closes).
    """

    metrics_exporter: MetricsExporter | None = None
    """What renders ``/metrics`` when ``metrics_port`` is set (an ``_observe.plugins``
    plug-in, set before ``run``); None: the Prometheus exporter."""

    @overload
    def __init__(
        self,
        app: WorkerApp,
        config: WorkerConfig | None = None,
        /,
        **options: Unpack[WorkerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self,
        app: Registry,
        backend: Backend,
        config: WorkerConfig | None = None,
        /,
        **options: Unpack[WorkerOptions],
    ) -> None: ...

    def __init__(
        self,
        app: WorkerApp | Registry,
        backend: Backend | WorkerConfig | None = None,
        config: WorkerConfig | None = None,
        /,
        **options: Unpack[WorkerOptions],
    ) -> None:
        if isinstance(app, Registry):
            if backend is None or isinstance(backend, WorkerConfig):
                raise TypeError(f"Worker(registry, backend): expected a Backend, got {backend!r}")
            registry, self._connect = app, _given(backend)
        else:
            if isinstance(backend, WorkerConfig):
                config = backend
        config = config or WorkerConfig()
        config = dataclasses.replace(config, **options) if options else config
        self._owns: Callable[[Schedule], bool] | None = None
        self._children: list[Worker] = []
        self._gauges: Service | None = None
        """Several databases: the process's gauges, started once every database's worker
        is ready (before, a schema may not be current, and a read would fail)."""
        self._every_database: Observe | None = None
        """Several databases: the reads of every one, for the process's database gauges."""
        if not isinstance(app, Registry):
            names = app.directory.names()
            if config.database is None and len(names) > 1:
                self._children = _per_database(app, config, names)
                self._every_database = Observe(Databases(_named(app), app.directory))
            database = config.database or names[0]
            registry, self._connect = app.registry, _from_app(app, database)
            owner_of = app.owner_of
            self._owns = lambda schedule: owner_of(schedule) == database
        self.registry = registry
        """The tasks, schedules and hooks this worker runs by (``app.registry``)."""
        self.name = config.name or f"{socket.gethostname()}:{os.getpid()}"
        self.config = dataclasses.replace(config, name=self.name)
        self.signals = WorkerSignals()
        """Test hooks (``signals.Signal``): free unless a test arms them."""
        self.ready = asyncio.Event()
        """Set once every service reported ready; cleared when the worker stops."""
        self.scheduler: Scheduler | None = None
        self.id = self.name
        """Unique per run once running (``name:random``): the lease token prefix and the
        worker's key in the live-worker registry (``app.workers()``)."""
        self._stopping = asyncio.Event()
        self._forced = asyncio.Event()
        self._stop_deadline: float | None = None
        self._services: list[Service] = []
        self._producer: Producer | None = None
        self._runner: Runner | None = None
        self._ledger: Ledger | None = None
        self.outage = Outage()
        """The database's health as every service sees it: one log line per change."""
        self.meter = Meter()
        """This worker's own counters and histograms (``skiplock.prometheus`` exports them)."""

    @property
    def processed(self) -> int:
        """Outcomes this worker recorded (every job it ran or released)."""
        if self._children:
            return sum(child.processed for child in self._children)
        return self._runner.processed if self._runner else 0

    @property
    def databases(self) -> dict[str, Worker]:
        """With several databases and no ``database`` given: the worker of each, by name
        (empty otherwise: this worker serves its one database itself)."""
        return {str(child.config.database): child for child in self._children}

    def status(self) -> dict[str, Any]:
        """What a health probe or the dashboard shows: readiness and each service's state."""
        if self._children:
            children = [child.status() for child in self._children]
            return {
                "name": self.name,
                "ready": self.ready.is_set(),
                "database_unavailable": any(c["database_unavailable"] for c in children),
                "services": {
                    f"{child.config.database}/{name}": state
                    for child, got in zip(self._children, children, strict=True)
                    for name, state in got["services"].items()
                },
                "running": sum(c["running"] for c in children),
                "claimed_ahead": sum(c["claimed_ahead"] for c in children),
                "processed": self.processed,
                "databases": {
                    c.config.database: got for c, got in zip(self._children, children, strict=True)
                },
            }
        ledger = self._ledger
        return {
            "name": self.name,
            "ready": self.ready.is_set(),
            "database_unavailable": self.outage.down,
            "services": {s.name: s.state.value for s in self._services},
            "running": ledger.busy if ledger else 0,
            "claimed_ahead": ledger.claimed_ahead if ledger else 0,
            "processed": self.processed,
        }

    # -- control ------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """First call: stop claiming and drain. Second call: skip the drain wait."""
        for child in self._children:
            child.request_stop()
        if self._stopping.is_set():
            self._forced.set()
            if self._runner is not None:
                self._runner.force()
        else:
            self._stop_deadline = time.monotonic() + self.config.shutdown_timeout_s
        self._stopping.set()
        if self._producer is not None:
            self._producer.stop()
        if self._runner is not None:
            self._runner.hold()

    # -- the whole worker ---------------------------------------------------------------------

    async def run(self, *, burst: bool = False) -> None:
        """Work until stopped; with ``burst``, return once nothing is ready to run."""
        if self._children:
            await self._run_children(burst)
            return
        backend = await self._connect(self._stopping)
        if backend is None:
            return  # asked to stop before the database ever answered
        try:
            await backend.warm_up()
        except BackendError as exc:  # only a head start: the producer copes with outages
            log.warning("warm-up failed (%s); going on", exc)
        self._log_start(backend)
        try:
            async with asyncio.TaskGroup() as tg:
                await self._serve(tg, backend, burst)
        finally:
            self.ready.clear()
        log.info("worker %s stopped after %d jobs", self.name, self.processed)

    async def _run_children(self, burst: bool) -> None:
        """Several databases: the worker of each, side by side in this event loop. One that
        cannot reach its database waits for it alone (its services report the outage); the
        others claim, run and complete meanwhile. This worker is ready once all of them are,
        and serves the health and metrics ports for them all."""
        children = self._children
        for child in children:
            child.meter = self.meter  # one set of counters for the process's /metrics

        async def readiness() -> None:
            await asyncio.gather(*(child.ready.wait() for child in children))
            if self._gauges is not None:  # every schema current now: the gauges can read
                endpoints.append(self._gauges)
                await self._gauges.start(tg)
            self.ready.set()
            self.signals.ready.fire("worker")

        log.info(
            "worker %s serves %d databases: %s",
            self.name,
            len(children),
            ", ".join(
                f"{c.config.database} (concurrency {c.config.concurrency})" for c in children
            ),
        )
        try:
            async with asyncio.TaskGroup() as tg:
                endpoints = self._endpoints(None)
                for service in endpoints:
                    await service.start(tg)
                ready = tg.create_task(readiness())
                try:
                    await asyncio.gather(*(child.run(burst=burst) for child in children))
                finally:
                    ready.cancel()
                    for service in endpoints:
                        service.stop()
        finally:
            self.ready.clear()
        log.info("worker %s stopped after %d jobs", self.name, self.processed)

    async def _serve(self, tg: asyncio.TaskGroup, backend: Backend, burst: bool) -> None:
        """Start every service, run the producer to its end, then stop them in order."""
        producer, runner, completer = self._build(tg, backend, burst)
        loop = asyncio.get_running_loop()

        def wake_from_any_thread(queue: str) -> None:
            loop.call_soon_threadsafe(producer.on_wake, queue)

        unsubscribe = self.registry.add_waker(wake_from_any_thread)
        if backend.on_released is None:  # a workflow release here wakes every worker here
            backend.on_released = self.registry.wake_queues
        try:
            for service in self._services:
                service.on_ready = self.signals.ready.fire
                await service.start(tg)
            self.ready.set()
            self.signals.ready.fire("worker")
            log.info("worker %s ready: every service started, first claim made", self.name)
            if self._stopping.is_set():  # asked to stop while starting
                producer.stop()
                runner.hold()
            await producer.join()
            runner.stop()  # drain: running jobs get the grace period, then are released
            await runner.join()
            await self._flush(completer)
        finally:
            unsubscribe()
            for service in self._services:
                service.stop()

    async def _flush(self, completer: Completer) -> None:
        """Write every outcome left. Once a stop was asked for, only until the grace period
        ends (at least FINAL_WRITE_S), and after a second stop for FINAL_WRITE_S more: with
        the database away the worker must still exit; what it could not write stays leased,
        and returns to pending when those leases expire."""
        completer.stop()
        if self._stop_deadline is None:  # a burst that ran out of work: write it all
            await completer.join()
            return
        if not self._forced.is_set():
            remaining = self._stop_deadline - time.monotonic()
            await _first(self._forced.wait(), completer.join(), timeout=remaining)
        if self._forced.is_set():  # the releases of the cancelled jobs, if the database is up
            await _first(completer.join(), timeout=0)
        self._abandon(completer)

    def _abandon(self, completer: Completer) -> None:
        unwritten = completer.unwritten()
        if not unwritten:
            return
        log.warning(
            "stopping with %d outcomes unwritten (the database is unavailable); their jobs "
            "stay leased to this worker and return to pending when the leases expire: %s",
            len(unwritten),
            [c.job_id for c in unwritten[:20]],
        )
        completer.cancel()

    def _build(
        self, tg: asyncio.TaskGroup, backend: Backend, burst: bool
    ) -> tuple[Producer, Runner, Completer]:
        """Every service of this worker, in start order (the producer last)."""
        config, signals, outage = self.config, self.signals, self.outage
        window = ClaimWindow(config.concurrency, config.prefetch)
        self._ledger = ledger = Ledger(config.concurrency, window)
        completer = Completer(
            backend,
            config.completion_batch,
            signals,
            self.registry.note_finished,
            outage,
            self.meter,
        )
        completer.ledger = ledger
        breakers = Breakers(self.registry, self.name, backend, tg.create_task, signals)
        self._runner = runner = Runner(
            self.registry, config, completer, breakers, signals, self.meter, ledger
        )
        leases = LeaseKeeper(backend, config, runner, ledger, signals, outage)
        self.id = token = f"{self.name}:{uuid.uuid4().hex[:12]}"
        report_worker(token, backend.url, backend.lanes)  # a supervisor releases them when it dies
        parts = (runner, completer, leases)
        self._producer = producer = Producer(
            backend,
            config,
            parts,
            signals,
            token_prefix=token,
            burst=burst,
            ledger=ledger,
            outage=outage,
            meter=self.meter,
        )
        outage.on_back = producer.wake.set  # claims resume as soon as any service gets through
        completer.on_requeued = producer.due_in
        completer.on_written = producer.written
        services: list[Service] = [completer, runner, leases]

        def load() -> tuple[int, int, float | None]:
            return ledger.busy + ledger.claimed_ahead, runner.processed, producer.last_claim_at

        presence = Presence(backend, config, token, load, outage, runner.children.children)
        dead = DeadWorkers(backend, token, self.name, presence.answered_for_s)
        rescuer = Rescuer(backend, config, signals, outage, self.meter, dead, producer.on_wake)
        services.append(rescuer)
        timer = WaitTimer(backend, config.maintenance_interval_s, outage)
        completer.on_parked = timer.due_in
        services.append(timer)
        # one lock for every expiry of this worker's: a burst's end sees none half done
        timer.expiry = rescuer.expiry = producer.expiry
        canceller = Canceller(backend, runner, ledger, outage=outage)
        services += [canceller, Pruner(backend, config, outage)]
        if backend.vacuums_hot and (config.vacuum_interval_s > 0 or config.rotate_interval_s > 0):
            services.append(Vacuumer(backend, config, outage, self.meter))
        if backend.keeps_wal and config.vacuum_interval_s > 0:
            services.append(Checkpointer(backend, config, outage, self.meter))
        services.append(Watchdog(leases.shortest))
        services.append(presence)
        if config.log_summary_interval_s > 0:

            def holding() -> tuple[int, int]:
                return ledger.busy, ledger.claimed_ahead

            services.append(
                LogSummary(self.meter, config.log_summary_interval_s, holding, config.name)
            )
        services += self._endpoints(backend)
        if not burst and backend.supports_push:  # a burst never idles: nothing to wake it
            services.append(Notifier(backend, producer.on_wake, outage))
        if config.scheduler and self.registry.schedules:
            self.scheduler = Scheduler(
                self.registry, backend, signals=signals, outage=outage, owns=self._owns
            )
            services.append(self.scheduler)
        self._services = [*services, producer]
        return producer, runner, completer

    def _endpoints(self, backend: Backend | None) -> list[Service]:
        """The metrics and health ports' services (none unless asked for). ``backend`` None
        (several databases): the database gauges are read from every database, each labelled
        with its name, by the process whose worker leads (``Gauges``)."""
        config = self.config
        by_port: dict[int, dict[str, Route]] = {}
        options: dict[int, str] = {}
        services: list[Service] = []
        if config.health_port is not None:
            by_port[config.health_port] = {"/livez": self._livez, "/readyz": self._readyz}
            options[config.health_port] = "health_port"
        if config.metrics_port is not None:
            gauges, metrics = self._metrics(backend)
            if gauges is not None:
                services.append(gauges)
            by_port.setdefault(config.metrics_port, {})["/metrics"] = metrics
            options.setdefault(config.metrics_port, "metrics_port")
        for port, routes in by_port.items():
            services.append(HttpEndpoint(options[port], config.http_host, port, routes))
        return services

    def _metrics(self, backend: Backend | None) -> tuple[Service | None, Route]:
        """The gauges' refresher and the /metrics route, rendered by the exporter this
        worker was handed (none: Prometheus, which needs its extra). No backend: several
        databases, read together; this process leads if one of its databases' workers
        does."""
        exporter = self.metrics_exporter or default_metrics_exporter()
        config = self.config
        cache = GaugeCache()
        silent_s = 3 * config.maintenance_interval_s + 5.0
        gauges: Gauges | None = None
        if backend is not None:
            reads = Observe(Databases.one(_getter(backend)))
            gauges = Gauges(reads, self.id, cache, config.stats_refresh_s, silent_s, self.outage)
        elif self._every_database is not None:
            children = self._children
            self._gauges = Gauges(
                self._every_database,
                lambda: [child.id for child in children],
                cache,
                config.stats_refresh_s,
                silent_s,
                self.outage,
            )
        meter = self.meter

        async def metrics() -> Response:
            return 200, exporter.content_type, exporter.render(meter, cache)

        return gauges, metrics

    async def _livez(self) -> Response:
        """Alive: this event loop answers (a stopped or blocked one answers nothing)."""
        return 200, "application/json", json.dumps({"alive": True, "name": self.name}).encode()

    async def _readyz(self) -> Response:
        """Ready: every service reports ready and the database answers."""
        status = self.status()
        ready = status["ready"] and not status["database_unavailable"]
        ready = ready and all(s == "ready" for s in status["services"].values())
        return (200 if ready else 503), "application/json", json.dumps(status).encode()

    def _log_start(self, backend: Backend) -> None:
        log.info(
            "worker %s started: queues=%s concurrency=%d backend=%s",
            self.name,
            ",".join(self.config.queues) if self.config.queues else "*",
            self.config.concurrency,
            mask_url(backend.url),
        )


async def _first(*waits: Coroutine[Any, Any, object], timeout: float) -> None:
    """Until the first of ``waits`` ends, for at least FINAL_WRITE_S and at most ``timeout``
    (whichever is longer); the others are cancelled."""
    futures = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(
            futures, timeout=max(timeout, FINAL_WRITE_S), return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        for future in futures:
            future.cancel()


def _per_database(app: WorkerApp, config: WorkerConfig, names: Sequence[str]) -> list[Worker]:
    """A worker for each database: the concurrency shared out (the first ones get what does
    not divide; at least one each), the ports left to the group, each named after its
    database so its claims say where they ran."""
    share, extra = divmod(config.concurrency, len(names))
    base = config.name or f"{socket.gethostname()}:{os.getpid()}"
    return [
        Worker(
            app,
            dataclasses.replace(
                config,
                database=name,
                concurrency=max(1, share + (1 if i < extra else 0)),
                name=f"{base}/{name}",
                metrics_port=None,
                health_port=None,
                # one meter for the process: its summary logged once, by the first
                log_summary_interval_s=config.log_summary_interval_s if i == 0 else 0.0,
            ),
        )
        for i, name in enumerate(names)
    ]


def _from_app(app: WorkerApp, database: str) -> Connect:
    """The backend of the app's ``database`` for this loop, once it answers with a current
    schema."""

    async def connect(stopping: asyncio.Event) -> Backend | None:
        if not await app.wait_for_database(stopping, database=database):
            return None
        return await app.backend(database=database)

    return connect


def _given(backend: Backend) -> Connect:
    """A backend the caller opened, once it answers with a current schema."""

    async def current() -> None:
        await _schema.check_current(backend, backend.url)

    async def connect(stopping: asyncio.Event) -> Backend | None:
        return backend if await _schema.wait_until_current(current, stopping) else None

    return connect


def _named(app: WorkerApp) -> Callable[[str], Awaitable[Backend]]:
    """The app's open backend of a database, by name (``Databases``' getter)."""

    async def get(database: str) -> Backend:
        return await app.backend(database=database)

    return get


def _getter(backend: Backend) -> Callable[[], Awaitable[Backend]]:
    async def get() -> Backend:
        return backend

    return get
