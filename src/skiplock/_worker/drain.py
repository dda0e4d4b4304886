"""``drain``: a burst worker in this process, run to the end of the ready jobs.

Public as ``skiplock.testing.drain``; ``App.drain()`` (the short form the guides use) calls it.
It sits with the worker, not in the App: the App holds no worker, and the testing package
(which imports the App) stays above both, so no import runs back up."""

from __future__ import annotations

from collections.abc import Sequence

from .._job import JobOutcome
from .worker import Worker, WorkerApp


async def drain(app: WorkerApp, *, queues: Sequence[str] | None = None) -> list[JobOutcome]:
    """Run every ready job of ``app`` in this process until none is left (a burst worker),
    and return the outcome of each job it ran, in the order they were written. Ready is due
    now: a parked ``wait_for`` whose timeout has passed runs; one still to come is not
    waited for, nor is a retry's delay."""
    chosen = tuple(queues) if queues is not None else None
    worker = Worker(app, queues=chosen, poll_interval_s=0.05)
    written = worker.signals.flushed.arm()
    await worker.run(burst=True)
    ids = list(dict.fromkeys(i for batch in written.drain() for i in batch))
    found = {o.id: o for o in await (await app.backend()).job_outcome_many(ids)}
    return [found[i] for i in ids if i in found]
