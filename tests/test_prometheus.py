"""Prometheus: a real worker process's ``/metrics``, parsed with prometheus-client's own
parser, has every metric docs/metrics.md lists (the list is read from the doc, so the two
cannot drift); labels stay bounded; one worker of several exports the database gauges; the
ASGI mount serves the same."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import skiplock
from skiplock._backends.params import WorkerBeatParams
from skiplock._observe.gauges import GaugeCache, Gauges
from skiplock._observe.meter import MAX_SERIES, Meter
from skiplock.prometheus import SkiplockCollector, metrics_app, render

from .apps import cli_app
from .helpers import ROOT, Cli, cli_fixtures, free_port, http_get

DOC = ROOT / "docs" / "metrics.md"


def documented_metrics() -> list[str]:
    """Every metric named in the first column of docs/metrics.md's tables."""
    names = re.findall(r"^\| `(skiplock_[a-z_]+)` \|", DOC.read_text(), re.MULTILINE)
    assert len(names) >= 20, names
    return names


def exposed_names(text: str) -> set[str]:
    """Family and sample names, as prometheus-client's parser reads the exposition."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names |= {sample.name for sample in family.samples}
    return names


def scrape_until(port: int, wanted: str, timeout: float = 30) -> str:
    """Scrape until the exposition contains ``wanted`` (a deadline, not a sleep)."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            _, text = http_get(port, "/metrics")
        except OSError:  # not listening yet
            text = ""
        if wanted in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"never saw {wanted!r} in:\n{text}")


cli, app = cli_fixtures(cli_app)


SENTINEL = 7_391_004_518
"""An argument value that must never reach the exposition."""


@pytest.mark.slow
async def test_a_worker_serves_every_documented_metric(cli: Cli, app: skiplock.App) -> None:
    for n in range(4):
        await cli_app.record.aenqueue(SENTINEL + n)
    port = free_port()
    cli.start("--metrics-port", str(port), "--stats-refresh", "0.2", "--maintenance-interval", "1")
    done = 'skiplock_jobs_total{outcome="succeeded",queue="default",task="record"} 4.0'
    scrape_until(port, done)
    text = scrape_until(port, 'skiplock_queue_finished_jobs{outcome="completed",queue="default"} 4')
    names = exposed_names(text)
    missing = [m for m in documented_metrics() if m not in names]
    assert not missing, f"documented but not exposed: {missing}\n{text}"
    assert "skiplock_metrics_leader 1.0" in text and "skiplock_workers 1.0" in text
    assert str(SENTINEL) not in text
    status, _ = http_get(port, "/nothing")
    assert status == 404


def test_labels_stay_bounded() -> None:
    meter = Meter()
    for n in range(MAX_SERIES + 50):
        meter.start("q", f"task-{n}")
    assert len(meter.series) == MAX_SERIES + 1  # the first MAX_SERIES pairs, then "other"
    assert meter.series[("other", "other")].started == 50


def beat(worker_id: str) -> WorkerBeatParams:
    return WorkerBeatParams(worker_id, worker_id, "h", 1, None, 1, 0, 0, None)


async def test_one_worker_of_several_reads_the_database_gauges(app_db: skiplock.App) -> None:
    backend = await app_db.backend()
    for worker_id in ("w:b", "w:a", "w:c"):
        await backend.worker_beat(beat(worker_id))
    caches = {worker_id: GaugeCache() for worker_id in ("w:a", "w:b", "w:c")}
    for worker_id, cache in caches.items():
        await Gauges(app_db, worker_id, cache).refresh()
    assert [w for w, c in caches.items() if c.leader] == ["w:a"]
    assert [w for w, c in caches.items() if c.stats is not None] == ["w:a"]
    texts = {w: render(SkiplockCollector(None, c)).decode() for w, c in caches.items()}
    assert "skiplock_queue_jobs" not in texts["w:b"] and "skiplock_workers 3.0" in texts["w:a"]
    await backend.worker_delete("w:a")  # the leader stops: the next smallest takes over
    await Gauges(app_db, "w:b", caches["w:b"]).refresh()
    assert caches["w:b"].leader


@pytest.fixture
async def app_db(db_url: str) -> AsyncIterator[skiplock.App]:
    the_app = skiplock.App(db_url)
    await the_app.migrate()
    yield the_app
    await the_app.close()


async def test_the_asgi_mount_serves_the_database_gauges(app_db: skiplock.App) -> None:
    @app_db.task(name="t", queue="mail")
    def t() -> None: ...

    await t.aenqueue()
    mount = metrics_app(app_db, refresh_s=60)
    transport = httpx.ASGITransport(app=mount)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        first = await client.get("/metrics")
        await t.aenqueue()
        cached = await client.get("/metrics")  # within refresh_s: the same reading
    assert first.status_code == 200 and first.headers["content-type"].startswith("text/plain")
    assert 'skiplock_queue_jobs{queue="mail",state="ready"} 1.0' in first.text
    assert 'skiplock_queue_jobs{queue="mail",state="ready"} 1.0' in cached.text
    assert "skiplock_jobs_total" not in first.text  # no worker in this process


async def test_the_busiest_keys_are_gauges_and_only_the_top_ten(app_db: skiplock.App) -> None:
    """One series set per key of the reading's top 10 (most running, then most ready): a
    thousand tenants export ten keys' gauges, not a thousand."""

    @app_db.task(name="t", concurrency_key=lambda n: f"acct:{n}", key_limit=3)
    def t(n: int) -> None: ...

    await app_db.enqueue_many([t.prepare(n) for n in range(25)] + [t.prepare(7)] * 4)
    mount = metrics_app(app_db, refresh_s=60)
    transport = httpx.ASGITransport(app=mount)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        text = (await client.get("/metrics")).text
    assert 'skiplock_key_jobs{key="acct:7",state="ready"} 5.0' in text
    assert 'skiplock_key_limit{key="acct:7"} 3.0' in text
    keys = {
        line.split('"')[1] for line in text.splitlines() if line.startswith("skiplock_key_jobs{")
    }
    assert len(keys) == 10 and "acct:7" in keys


async def test_a_blocked_ordered_key_is_a_gauge_naming_its_dead_job(
    app_db: skiplock.App,
) -> None:
    """A dead ``block`` job holds its ordered key: the gauge names the key and the dead job,
    with the jobs waiting behind it; none while no key is blocked."""

    @app_db.task(name="o", ordering_key=lambda n: "acct:1", max_attempts=1)
    def o(n: int) -> None:
        raise RuntimeError("no")

    mount = metrics_app(app_db, refresh_s=0)
    transport = httpx.ASGITransport(app=mount)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        assert "skiplock_blocked_key_jobs{" not in (await client.get("/metrics")).text
        first = await o.aenqueue(1)
        await app_db.enqueue_many([o.prepare(2), o.prepare(3)])
        await app_db.drain()  # the first dies; the key blocks the other two
        text = (await client.get("/metrics")).text
    assert f'skiplock_blocked_key_jobs{{dead_job_id="{first.id}",key="acct:1"}} 2.0' in text
