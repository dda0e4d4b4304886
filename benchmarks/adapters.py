"""One adapter per system under test, all with the same small async surface.

    install()                  create the system's tables in a fresh database
    open() / close()           pools and connections
    enqueue(kind, seq)         one job, the system's one-at-a-time call
    enqueue_bulk(kind, n)      n jobs through the system's bulk call (BULK is False: none)
    work(burst)                run one worker in this process; burst returns once drained
    stop()                     ask a running ``work`` to return (W4)

Three job kinds exist everywhere: ``noop``, ``sleep`` (``await asyncio.sleep(0.01)``) and
``mark`` (records its start time under the sequence number it carries). Every job writes
into ``common.REC``. Peers' modules are imported only inside their adapter, so measuring one
system never pays for importing another.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any, ClassVar

from .common import REC, now

SLEEP_S = 0.01


class NotSupported(Exception):
    """The system has no such call (reported as such, never faked)."""


class Adapter:
    name: ClassVar[str]
    BULK: ClassVar[bool] = True

    def __init__(self, url: str, opts: dict[str, Any]) -> None:
        self.url = url
        self.opts = opts

    async def install(self) -> None:
        raise NotImplementedError

    async def open(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def enqueue(self, kind: str, seq: int | None = None) -> None:
        raise NotImplementedError

    async def enqueue_bulk(self, kind: str, n: int) -> None:
        raise NotSupported(f"{self.name} has no bulk enqueue")

    async def work(self, *, burst: bool) -> None:
        raise NotImplementedError

    async def roundtrip(self, n: int) -> dict[str, list[float]]:
        """W7: enqueue n jobs one after another and await each one's outcome as it comes
        (a warm-up job first, excluded): when each enqueue began and its outcome arrived."""
        raise NotSupported(f"{self.name} cannot wait for a job's outcome")

    def stop(self) -> None:
        raise NotImplementedError

    def settings(self) -> str:
        """The worker settings used, for the tables."""
        return ", ".join(f"{k}={v}" for k, v in sorted(self.opts.items()))


# -- skiplock (PostgreSQL and SQLite) -------------------------------------------------------------


async def _sk_noop() -> None:
    REC.start()
    REC.end()


async def _sk_sleep() -> None:
    REC.start()
    await asyncio.sleep(SLEEP_S)
    REC.end()


async def _sk_mark(seq: int) -> None:
    REC.start(seq)
    REC.end()


async def _sk_echo(seq: int) -> int:
    REC.start(seq)
    REC.end()
    return seq


async def _timed_waits(n: int, enqueue: Any, wait: Any) -> dict[str, list[float]]:
    """Enqueue n jobs in sequence, each awaited by its own task: begin and arrival times."""
    began, arrived = [0.0] * n, [0.0] * n

    async def outcome(seq: int, job: Any) -> None:
        await wait(seq, job)
        arrived[seq] = now()

    waits = []
    for seq in range(n):
        began[seq] = now()
        waits.append(asyncio.create_task(outcome(seq, await enqueue(seq))))
    await asyncio.gather(*waits)
    return {"began": began, "arrived": arrived}


class SkiplockAdapter(Adapter):
    name = "skiplock"

    def __init__(self, url: str, opts: dict[str, Any]) -> None:
        super().__init__(url, opts)
        import skiplock

        self._skiplock = skiplock
        self.app = skiplock.App(url)
        self.tasks: dict[str, Any] = {
            "noop": self.app.task(name="noop")(_sk_noop),
            "sleep": self.app.task(name="sleep")(_sk_sleep),
            "mark": self.app.task(name="mark")(_sk_mark),
            "echo": self.app.task(name="echo")(_sk_echo),
        }
        self.worker: Any = None

    async def install(self) -> None:
        await self.app.migrate()

    async def open(self) -> None:
        # The fill step opens before it installs: a fresh SQLite file is the bench's own to
        # create (skiplock's commands other than migrate never create one, issue 20).
        await self.app.backend(create=True)

    async def close(self) -> None:
        await self.app.close()

    async def enqueue(self, kind: str, seq: int | None = None) -> None:
        task = self.tasks[kind]
        await (task.aenqueue(seq) if seq is not None else task.aenqueue())

    async def enqueue_bulk(self, kind: str, n: int) -> None:
        await self.app.enqueue_many(self.tasks[kind].prepare() for _ in range(n))

    async def work(self, *, burst: bool) -> None:
        self.worker = self._skiplock.Worker(self.app, **self._worker_options())
        await self.worker.run(burst=burst)

    def _worker_options(self) -> dict[str, Any]:
        """The options under the names of the skiplock being measured: a ``--rev`` before
        WorkerConfig's durations ended in ``_s`` (230bf34 and older) knows them without it."""
        fields = {f.name for f in dataclasses.fields(self._skiplock.WorkerConfig)}
        return {
            name if name in fields else name.removesuffix("_s"): value
            for name, value in self.opts.items()
        }

    def stop(self) -> None:
        self.worker.request_stop()

    async def roundtrip(self, n: int) -> dict[str, list[float]]:
        echo = self.tasks["echo"]
        assert await (await echo.aenqueue(-1)).result(timeout=60) == -1  # warm-up: the LISTEN

        async def wait(seq: int, handle: Any) -> None:
            if await handle.result(timeout=120) != seq:
                raise AssertionError(f"job {seq} returned the wrong value")

        return await _timed_waits(n, echo.aenqueue, wait)


# -- pgqueuer -------------------------------------------------------------------------------------


class PgqueuerAdapter(Adapter):
    """pgqueuer over an asyncpg pool. Options: batch_size, max_concurrent_tasks, pool."""

    name = "pgqueuer"

    def __init__(self, url: str, opts: dict[str, Any]) -> None:
        super().__init__(url, opts)
        logging.getLogger("pgqueuer").setLevel(logging.WARNING)
        self.pool: Any = None
        self.queries: Any = None
        self.qm: Any = None

    async def open(self) -> None:
        import asyncpg
        from pgqueuer.db import AsyncpgPoolDriver
        from pgqueuer.queries import Queries

        self.pool = await asyncpg.create_pool(
            self.url, min_size=2, max_size=int(self.opts.get("pool", 10))
        )
        self.driver = AsyncpgPoolDriver(self.pool)
        self.queries = Queries(self.driver)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()

    async def install(self) -> None:
        await self.queries.install()

    async def enqueue(self, kind: str, seq: int | None = None) -> None:
        await self.queries.enqueue(kind, None if seq is None else str(seq).encode())

    async def enqueue_bulk(self, kind: str, n: int) -> None:
        await self.queries.enqueue([kind] * n, [None] * n, [0] * n)

    async def work(self, *, burst: bool) -> None:
        from pgqueuer.models import Job
        from pgqueuer.qm import QueueManager
        from pgqueuer.types import QueueExecutionMode

        qm = self.qm = QueueManager(self.queries)

        @qm.entrypoint("noop")
        async def noop(job: Job) -> None:
            REC.start()
            REC.end()

        @qm.entrypoint("sleep")
        async def sleep(job: Job) -> None:
            REC.start()
            await asyncio.sleep(SLEEP_S)
            REC.end()

        @qm.entrypoint("mark")
        async def mark(job: Job) -> None:
            REC.start(int(job.payload or b"0"))
            REC.end()

        limit = self.opts.get("max_concurrent_tasks")
        await qm.run(
            batch_size=int(self.opts.get("batch_size", 10)),
            max_concurrent_tasks=int(limit) if limit else None,
            mode=QueueExecutionMode.drain if burst else QueueExecutionMode.continuous,
        )

    def stop(self) -> None:
        self.qm.shutdown.set()


# -- procrastinate --------------------------------------------------------------------------------


class ProcrastinateAdapter(Adapter):
    """procrastinate over its psycopg 3 connector. Options: concurrency, pool."""

    name = "procrastinate"

    def __init__(self, url: str, opts: dict[str, Any]) -> None:
        super().__init__(url, opts)
        import procrastinate

        logging.getLogger("procrastinate").setLevel(logging.WARNING)
        self._procrastinate = procrastinate
        self.app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(
                conninfo=url, min_size=1, max_size=int(opts.get("pool", 10))
            )
        )

        @self.app.task(name="noop")
        async def noop() -> None:
            REC.start()
            REC.end()

        @self.app.task(name="sleep")
        async def sleep() -> None:
            REC.start()
            await asyncio.sleep(SLEEP_S)
            REC.end()

        @self.app.task(name="mark")
        async def mark(seq: int) -> None:
            REC.start(seq)
            REC.end()

        self.tasks: dict[str, Any] = {"noop": noop, "sleep": sleep, "mark": mark}
        self.worker: Any = None

    async def open(self) -> None:
        await self.app.open_async()

    async def close(self) -> None:
        await self.app.close_async()

    async def install(self) -> None:
        await self.app.schema_manager.apply_schema_async()

    async def enqueue(self, kind: str, seq: int | None = None) -> None:
        task = self.tasks[kind]
        await (task.defer_async(seq=seq) if seq is not None else task.defer_async())

    async def enqueue_bulk(self, kind: str, n: int) -> None:
        await self.tasks[kind].batch_defer_async(*({} for _ in range(n)))

    async def work(self, *, burst: bool) -> None:
        from procrastinate.worker import Worker

        self.worker = Worker(
            app=self.app,
            concurrency=int(self.opts.get("concurrency", 1)),
            wait=not burst,
            install_signal_handlers=False,
        )
        await self.worker.run()

    def stop(self) -> None:
        self.worker.stop()

    def settings(self) -> str:
        return f"concurrency={self.opts.get('concurrency', 1)}, pool={self.opts.get('pool', 10)}"


# -- the seed 000 design --------------------------------------------------------------------------


class SeedAdapter(Adapter):
    name = "seed-000"
    BULK = False

    def __init__(self, url: str, opts: dict[str, Any]) -> None:
        super().__init__(url, opts)
        from .seed000 import SeedQueue

        async def noop(_payload: dict[str, Any]) -> None:
            REC.start()
            REC.end()

        async def sleep(_payload: dict[str, Any]) -> None:
            REC.start()
            await asyncio.sleep(SLEEP_S)
            REC.end()

        async def mark(payload: dict[str, Any]) -> None:
            REC.start(int(payload["seq"]))
            REC.end()

        self.queue = SeedQueue(url, {"noop": noop, "sleep": sleep, "mark": mark})

    async def install(self) -> None:
        await self.queue.install()

    async def open(self) -> None:
        await self.queue.open()

    async def close(self) -> None:
        await self.queue.close()

    async def enqueue(self, kind: str, seq: int | None = None) -> None:
        await self.queue.enqueue(kind, {} if seq is None else {"seq": seq})

    async def fill(self, kind: str, n: int) -> None:
        """Setup only (never measured): the seed has no bulk call, so insert with SQL."""
        assert self.queue.pool is not None
        await self.queue.pool.execute(
            "INSERT INTO jobs (kind) SELECT $1 FROM generate_series(1, $2)", kind, n
        )

    async def work(self, *, burst: bool) -> None:
        await self.queue.run(burst=burst)

    def stop(self) -> None:
        self.queue.request_stop()

    def settings(self) -> str:
        from .seed000 import BATCH, POOL_MAX, WORKERS

        return f"{WORKERS} workers x batch {BATCH}, sequential, pool {POOL_MAX}"


ADAPTERS: dict[str, type[Adapter]] = {
    "skiplock": SkiplockAdapter,
    "pgqueuer": PgqueuerAdapter,
    "procrastinate": ProcrastinateAdapter,
    "seed-000": SeedAdapter,
}


async def fill(adapter: Adapter, kind: str, n: int) -> None:
    """Queue n jobs as fast as the system allows (setup, not measured)."""
    if isinstance(adapter, SeedAdapter):
        await adapter.fill(kind, n)
    else:
        await adapter.enqueue_bulk(kind, n)
