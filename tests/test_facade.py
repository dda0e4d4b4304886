"""The App as a facade over named parts (issue 23): a worker runs on the app's ``Registry``
and a backend without the App, a ``Task`` enqueues through any ``Enqueuing``, and ``drain``
is ``skiplock.testing``'s."""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, TypeVar

import pytest

import skiplock
from skiplock import JobOutcome, JobRecord, JobState, Task, Worker, WorkerConfig
from skiplock._job import NewJob
from skiplock._registry import Registry
from skiplock._task import JobHandle
from skiplock.testing import drain

T = TypeVar("T")


async def test_a_worker_runs_on_a_registry_and_a_backend_it_is_given(
    app: skiplock.App,
) -> None:
    """``Worker(registry, backend, config)``: the jobs run on the caller's open backend,
    and the worker opens none of the App's (it never sees the App)."""
    ran: list[int] = []

    @app.task(name="double")
    def double(x: int) -> int:
        ran.append(x)
        return 2 * x

    handles = [await double.aenqueue(i) for i in range(3)]
    await app.close()  # the App holds no backend on this loop now
    backend = app.new_backend()
    await backend.open()
    try:
        worker = Worker(app.registry, backend, WorkerConfig(poll_interval_s=0.05))
        assert worker.registry is app.registry
        await worker.run(burst=True)
        assert sorted(ran) == [0, 1, 2]
        outcomes = await backend.job_outcome_many([h.id for h in handles])
        assert {o.state for o in outcomes} == {JobState.SUCCEEDED}
        assert not app._backends  # the App was not asked to open one
    finally:
        await backend.close()


def test_the_registry_form_needs_a_backend() -> None:
    with pytest.raises(TypeError, match="expected a Backend"):
        Worker(Registry(), WorkerConfig())  # type: ignore[call-overload]


async def test_worker_app_form_takes_its_config_positionally(app: skiplock.App) -> None:
    worker = Worker(app, WorkerConfig(concurrency=3), name="w")
    assert worker.registry is app.registry
    assert (worker.config.concurrency, worker.config.name) == (3, "w")


class RecordingOwner:
    """An ``Enqueuing`` that is not an App: what a Task calls, recorded."""

    max_payload_bytes = 1024

    def __init__(self) -> None:
        self.batches: list[list[NewJob]] = []

    def lane_for(self, queue: str, task_lane: str | None, key: str | None) -> str:
        return task_lane or "default"

    async def enqueue_many(
        self, jobs: Iterable[NewJob], *, connection: object | None = None
    ) -> list[JobHandle]:
        batch = list(jobs)
        self.batches.append(batch)
        return [JobHandle(i + 1, j.task, j.queue, self) for i, j in enumerate(batch)]

    def enqueue_many_sync(
        self, jobs: Iterable[NewJob], *, connection: object | None = None
    ) -> list[JobHandle]:
        raise NotImplementedError

    async def get_job(self, job_id: int) -> JobRecord:
        raise NotImplementedError

    async def wait_for_outcomes(
        self, job_ids: Sequence[int], timeout: float | None = None
    ) -> dict[int, JobOutcome]:
        return {i: JobOutcome(i, JobState.SUCCEEDED, "7") for i in job_ids}

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        raise NotImplementedError


async def test_a_task_enqueues_through_the_narrow_protocol() -> None:
    """A Task needs only ``Enqueuing`` of its owner: no App, no database."""
    owner = RecordingOwner()
    task: Task[[int], int] = Task(app=owner, fn=lambda x: x, name="ident", queue="q")
    handle = await task.aenqueue(7)
    assert [(j.task, j.queue, j.args_json) for j in owner.batches[0]] == [("ident", "q", "[7]")]
    assert await handle.result() == 7


async def test_drain_is_the_testing_helper(app: skiplock.App) -> None:
    @app.task(name="one")
    def one() -> int:
        return 1

    first = await one.aenqueue()
    (outcome,) = await drain(app)
    assert (outcome.id, outcome.state) == (first.id, JobState.SUCCEEDED)
    second = await one.aenqueue()
    assert [o.id for o in await app.drain()] == [second.id]  # App.drain() is the same
