"""The lease keeper: renews, in one batched statement, every lease this worker holds.

Held means running, claimed ahead, or finished with the outcome not yet written (say the
database is away: the lease must outlive the outage or another worker runs the job again).
It beats at a third of the shortest lease held, so two beats can fail before one expires,
and every claim re-arms it: a job claimed with a short lease while the keeper slept on a
long interval is renewed in time, not after it lapsed (issue 9, item 5). A lease the beat
finds gone belongs to another worker now: the runner cancels that job here. What is held
it reads from the worker's ``Ledger``; it never changes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from .._backends import Backend
from .._backends.params import JobHeartbeatManyParams
from .._config import WorkerConfig
from .._outage import Outage
from .._service import Service
from ..errors import BackendUnavailable
from .ledger import Ledger
from .progress import PROGRESS_INTERVAL_S
from .runner import Runner
from .signals import WorkerSignals

log = logging.getLogger("skiplock.worker")

HEARTBEAT_INTERVAL_S = 10.0
MIN_BEAT_S = 0.2


class LeaseKeeper(Service):
    name = "lease-keeper"

    def __init__(
        self,
        backend: Backend,
        config: WorkerConfig,
        runner: Runner,
        ledger: Ledger,
        signals: WorkerSignals,
        outage: Outage | None = None,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.config = config
        self.runner = runner
        """Told the leases a beat found lost (it cancels their attempts); its progress board."""
        self.ledger = ledger
        self.signals = signals
        self.outage = outage or Outage()
        self._rearm = asyncio.Event()

    def rearm(self) -> None:
        """New leases were taken: bring the next beat forward if they need it sooner."""
        self._rearm.set()

    async def serve(self) -> None:
        self.runner.progress.subscribe(self.rearm)
        self.mark_ready()
        loop = asyncio.get_running_loop()
        due = loop.time() + self.interval_s()
        while True:
            self._rearm.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, due - loop.time())):
                    await self._rearm.wait()
            if self._rearm.is_set():  # only re-armed: keep the earlier of the two deadlines
                due = min(due, loop.time() + self.interval_s())
                continue
            await self.beat()
            due = loop.time() + self.interval_s()

    def interval_s(self) -> float:
        """A third of the shortest lease held, within [MIN_BEAT_S, HEARTBEAT_INTERVAL_S];
        at most PROGRESS_INTERVAL_S while a progress record waits to be written."""
        leases = [lease for _, _, lease in self.held() if lease]
        shortest = min(leases, default=HEARTBEAT_INTERVAL_S * 3)
        ceiling = min(HEARTBEAT_INTERVAL_S, self.config.maintenance_interval_s)
        if self.runner.progress.waiting:
            ceiling = min(ceiling, PROGRESS_INTERVAL_S)
        return max(MIN_BEAT_S, min(ceiling, shortest / 3))

    def held(self) -> list[tuple[int, str, float | None]]:
        """Every lease this worker holds, as (job id, token, length): claimed ahead,
        running, and finished with the outcome not yet written (the ledger's ``held``)."""
        return self.ledger.held()

    def shortest(self) -> tuple[int, float] | None:
        """The shortest lease held now, as (job id, seconds); None when none is held."""
        leases = [(lease, job_id) for job_id, _, lease in self.held() if lease]
        if not leases:
            return None
        lease, job_id = min(leases)
        return job_id, lease

    async def beat(self) -> None:
        held = [(job_id, token) for job_id, token, _ in self.held()]
        if not held:
            return
        params = JobHeartbeatManyParams(
            held,
            self.config.default_lease_s,
            self.config.lease_margin_s,
            started=self.ledger.started(),
            progress=self.runner.progress.take({job_id for job_id, _ in held}),
            segments=self.ledger.segments(),
            lanes=self.ledger.lanes(),
        )
        try:
            kept = await self.backend.job_heartbeat_many(params)
        except BackendUnavailable as exc:
            self.outage.failed(self.name, exc)
            return
        self.outage.answered()
        self.signals.heartbeat.fire(len(kept))
        lost = set(held).difference(kept)
        if lost:
            self.runner.leases_lost(lost)
