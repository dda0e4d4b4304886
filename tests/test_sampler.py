"""The dashboard's sampler runs on the one Service lifecycle (no browser needed)."""

from __future__ import annotations

import logging

import pytest

import skiplock
from skiplock._service import ServiceState
from skiplock.dashboard.sampler import Sampler


async def test_the_sampler_is_a_detached_service_started_once_and_stopped(
    app: skiplock.App,
) -> None:
    @app.task(name="work", queue="work")
    async def work() -> None:
        pass

    await work.aenqueue()
    sampler = Sampler(app, every_s=3600)
    assert sampler.state is ServiceState.NEW
    await sampler.start_detached()  # ready once the first sample is in
    assert sampler.state is ServiceState.READY
    assert sampler.depths("work") == [1]
    sampler.ensure_started()  # a second request: the same loop, not a second one
    assert sampler.depths("work") == [1]
    await sampler.aclose()
    assert sampler.state is ServiceState.STOPPED
    assert sampler.error is None


class _Bug(BaseException):
    """Not an Exception: the loop's outage guard lets it through, as it would a real bug."""


async def test_a_sampler_that_dies_is_logged_at_once(
    app: skiplock.App, caplog: pytest.LogCaptureFixture
) -> None:
    sampler = Sampler(app, every_s=3600)

    async def dies() -> None:
        raise _Bug

    sampler.sample = dies  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="skiplock"):
        await sampler.start_detached()
        await sampler.join()
    assert isinstance(sampler.error, _Bug)
    assert "dashboard sampler died" in caplog.text
