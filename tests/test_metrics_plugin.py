"""A worker renders ``/metrics`` with the exporter it is handed (``_observe.plugins``)."""

from __future__ import annotations

import asyncio
import urllib.request

import skiplock
from skiplock._observe.gauges import GaugeCache
from skiplock._observe.meter import Meter

from .helpers import free_port


class CountingExporter:
    """A metrics plug-in of another kind than Prometheus: one line of the meter's numbers."""

    content_type = "text/plain; charset=utf-8"

    def __init__(self) -> None:
        self.seen: list[tuple[Meter | None, GaugeCache]] = []

    def render(self, meter: Meter | None, gauges: GaugeCache) -> bytes:
        self.seen.append((meter, gauges))
        started = sum(s.started for s in meter.series.values()) if meter else 0
        return f"started {started}\n".encode()


def fetch(port: int) -> tuple[str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return answer.headers["content-type"], answer.read().decode()


async def test_the_worker_serves_metrics_through_the_exporter_it_received(
    app: skiplock.App,
) -> None:
    @app.task(name="one")
    async def one() -> None:
        pass

    handle = await one.aenqueue()
    port = free_port()
    worker = skiplock.Worker(app, metrics_port=port, poll_interval_s=0.05)
    exporter = CountingExporter()
    worker.metrics_exporter = exporter
    run = asyncio.create_task(worker.run())
    try:
        await handle.result(timeout=20)
        await asyncio.wait_for(worker.ready.wait(), 20)
        content_type, body = await asyncio.to_thread(fetch, port)
    finally:
        worker.request_stop()
        await asyncio.wait_for(run, 30)
    assert content_type == "text/plain; charset=utf-8"
    assert body == "started 1\n"
    assert exporter.seen[0][0] is worker.meter
