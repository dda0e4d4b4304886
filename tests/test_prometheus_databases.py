"""Prometheus over several databases (issue 46): each database-derived gauge is read from
every database and carries a ``database`` label naming it (the ASGI mount and a worker
process serving every database alike); a one-database App's series keep the labels they
always had. Parsed with prometheus-client's own parser, on two real PostgreSQL databases."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import skiplock
from skiplock import Database
from skiplock._backends.params import JobInsertManyParams
from skiplock.prometheus import metrics_app

from .backends.helpers import new_job
from .helpers import free_port, running


@pytest.fixture
def app(two_db_app: skiplock.App) -> skiplock.App:
    return two_db_app


async def insert(app: skiplock.App, database: str, queue: str, n: int, key: str = "") -> None:
    backend = await app.backend(database=database)
    jobs = [new_job("t", queue=queue, concurrency_key=key or None) for _ in range(n)]
    await backend.job_insert_many(JobInsertManyParams(jobs))


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """``name``'s samples, each by its labels (sorted pairs)."""
    found: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


async def scrape(app: skiplock.App) -> str:
    mount = metrics_app(app, refresh_s=0)
    transport = httpx.ASGITransport(app=mount)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        return (await client.get("/metrics")).text


async def test_the_mount_labels_every_databases_gauges(app: skiplock.App) -> None:
    await insert(app, "default", "own", 1)
    await insert(app, "b", "far", 2, key="acct:1")
    text = await scrape(app)
    jobs = samples(text, "skiplock_queue_jobs")
    assert jobs[(("database", "default"), ("queue", "own"), ("state", "ready"))] == 1
    assert jobs[(("database", "b"), ("queue", "far"), ("state", "ready"))] == 2
    assert all(dict(labels).get("database") for labels in jobs)
    ages = samples(text, "skiplock_queue_backlog_age_seconds")
    assert {dict(labels)["database"] for labels in ages} == {"default", "b"}
    keys = samples(text, "skiplock_key_jobs")
    assert keys[(("database", "b"), ("key", "acct:1"), ("state", "ready"))] == 2
    assert samples(text, "skiplock_workers") == {
        (("database", "default"),): 0,
        (("database", "b"),): 0,
    }
    assert samples(text, "skiplock_stats_window_seconds") == {(): 300.0}


async def test_one_database_keeps_its_labels(pg_url: str) -> None:
    app = skiplock.App(pg_url)
    try:
        await app.migrate()
        await insert(app, "default", "own", 1)
        text = await scrape(app)
    finally:
        await app.close()
    assert samples(text, "skiplock_queue_jobs")[(("queue", "own"), ("state", "ready"))] == 1
    assert samples(text, "skiplock_workers") == {(): 0}
    for family in text_string_to_metric_families(text):
        assert all("database" not in s.labels for s in family.samples), family.name


async def test_a_worker_serving_every_database_exports_each_ones_gauges(
    app: skiplock.App,
) -> None:
    await insert(app, "b", "far", 3)
    port = free_port()
    async with (
        running(
            app,
            name="metered",
            queues=["none"],
            metrics_port=port,
            stats_refresh_s=0.2,
            maintenance_interval_s=0.5,
        ) as worker,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client,
    ):
        for _ in range(300):  # until the gauges are read (a deadline, not a sleep)
            answer = await client.get("/metrics") if worker.ready.is_set() else None
            text = answer.text if answer is not None else ""
            workers = samples(text, "skiplock_workers") if text else {}
            if workers.get((("database", "b"),)) == 1:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"no database gauges:\n{text}")
    assert "skiplock_metrics_leader 1.0" in text
    assert workers == {(("database", "default"),): 1, (("database", "b"),): 1}
    jobs = samples(text, "skiplock_queue_jobs")
    assert jobs[(("database", "b"), ("queue", "far"), ("state", "ready"))] == 3


async def test_a_database_down_leaves_its_series_out_the_others_stay(
    app: skiplock.App,
) -> None:
    await insert(app, "default", "own", 1)
    down = "postgresql://postgres@127.0.0.1:1/nowhere"  # nothing listens on port 1
    half = skiplock.App(app.url, databases={"b": Database(down, number=1)})
    try:
        text = await scrape(half)
    finally:
        await half.close()
    jobs = samples(text, "skiplock_queue_jobs")
    assert jobs[(("database", "default"), ("queue", "own"), ("state", "ready"))] == 1
    assert {dict(labels)["database"] for labels in jobs} == {"default"}
    assert samples(text, "skiplock_workers") == {(("database", "default"),): 0}
