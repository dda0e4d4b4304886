"""The app the dashboard's browser tests serve and work: a queue to drain, a task that dies
until a flag file exists (to requeue it from the dead letters), one whose error is markup."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import skiplock

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test


@app.task(name="work", queue="work")
async def work(n: int, secret: str = "") -> int:
    await asyncio.sleep(0.05)
    return n


@app.task(name="fragile", queue="work", max_attempts=1)
async def fragile(order: int) -> str:
    if not os.path.exists(os.environ["SKIPLOCK_TEST_FLAG"]):  # noqa: ASYNC240  # a stat
        raise ConnectionError("payment gateway unreachable")
    return f"charged order {order}"


@app.task(name="hostile", queue="work", max_attempts=1)
async def hostile() -> None:
    raise ValueError("<script>window.__pwned = 1</script><img src=x onerror=alert(1)>")


@app.task(name="archived", queue="archive")
async def archived(n: int) -> None:
    """Never claimed in the tests (no worker serves ``archive``): rows for paging."""


@app.periodic("*/15 * * * *", name="nightly-report", tz="Europe/Paris")
@app.task(name="report", queue="work")
async def report() -> None:
    pass


@app.periodic("0 0 1 1 * 30", name="yearly-at-30s")
@app.task(name="new_year", queue="archive")
async def new_year() -> None:
    """A schedule with a seconds field (00:00:30 on 1 January): the Schedules page shows its
    fires to the second. It never fires during a test."""


def _v1_to_v2(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    return [*args, "en"], kwargs


@app.task(name="greet", queue="archive", version=2, upcast={1: _v1_to_v2})
async def greet(name: str, lang: str) -> None:
    """A task at payload version 2 (its job page shows the version)."""


@app.task(name="step", queue="flows")
async def step(n: int) -> int:
    """A workflow's step (the Workflow section and graph of a job's page): no worker of the
    browser tests serves ``flows``; the test drains it in process."""
    return n


@app.task(name="approve", queue="flows")
async def approve(order: int) -> Any:
    """Parks on the signal ``approved`` (the Waiting page's Send signal) and returns its
    payload once it comes."""
    return await skiplock.current_job().wait_for("approved", timeout=3600)
