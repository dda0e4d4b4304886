"""Rate-limited claims: the bound holds exactly over its window, fractional rates included.

A rate r allows ceil(r) starts in any window of ceil(r) / r seconds (0.5/s: one start in any
2 s; 2.9/s: three in any 1.034 s; 5/s: five in any second). Time is the injected clock, so
these tests read the database clock's arithmetic, not the event loop's.
"""

from __future__ import annotations

import pytest

import skiplock
from skiplock._backends import Backend
from skiplock._backends.params import JobInsertManyParams, QueueSetLimitsParams

from ..helpers import FakeClock
from .helpers import claim, new_job


async def claimed(backend: Backend) -> int:
    return len(await backend.job_get_available_limited(claim(limit=10, queues=("rated",))))


async def rated(backend: Backend, rate: float, jobs: int = 10) -> None:
    await backend.queue_set_limits(QueueSetLimitsParams("rated", rate_per_s=rate))
    await backend.job_insert_many(
        JobInsertManyParams([new_job(queue="rated") for _ in range(jobs)])
    )


async def test_a_rate_below_one_starts_one_job_per_window(
    backend: Backend, clock: FakeClock
) -> None:
    await rated(backend, 0.5)
    assert await claimed(backend) == 1
    clock.advance(1.99)
    assert await claimed(backend) == 0
    clock.advance(0.02)
    assert await claimed(backend) == 1


async def test_a_fractional_rate_above_one_is_not_rounded_down(
    backend: Backend, clock: FakeClock
) -> None:
    await rated(backend, 2.9)
    assert await claimed(backend) == 3
    clock.advance(1.0)  # the window is 3 / 2.9 = 1.0345 s
    assert await claimed(backend) == 0
    clock.advance(0.04)
    assert await claimed(backend) == 3


async def test_a_whole_rate_keeps_its_one_second_window(backend: Backend, clock: FakeClock) -> None:
    await rated(backend, 5, jobs=12)
    assert await claimed(backend) == 5
    clock.advance(0.5)
    assert await claimed(backend) == 0
    clock.advance(0.51)
    assert await claimed(backend) == 5


@pytest.mark.parametrize("rate", [0.0, -1.0, float("inf"), float("nan")])
async def test_a_rate_that_bounds_nothing_is_refused(app: skiplock.App, rate: float) -> None:
    @app.task(name="r", queue="rated")
    async def r() -> None: ...

    with pytest.raises(skiplock.ConfigurationError, match="rate_per_s"):
        await app.set_queue_limits("rated", rate_per_s=rate)
