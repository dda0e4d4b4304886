"""OpenTelemetry: a job enqueued in this process (inside a request span) and run by a worker in
another are one trace: the run's ``process`` span is a child of the enqueue's ``send`` span
and links to it, both with messaging attributes and no payload. Spans are read from the SDK's
in-memory exporter in both processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import skiplock
from skiplock.otel import instrument, uninstrument

from .apps import otel_app
from .helpers import ROOT

SENTINEL = "p4yl0ad-91c3"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """This process's spans (the enqueuing side)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrument(otel_app.app, tracer_provider=provider)
    yield memory
    uninstrument(otel_app.app)


@pytest.fixture
async def app(db_url: str, exporter: InMemorySpanExporter) -> AsyncIterator[skiplock.App]:
    otel_app.app.url = db_url
    await otel_app.app.migrate()
    yield otel_app.app
    await otel_app.app.close()


def run_worker_elsewhere(url: str, tmp_path: Path) -> list[dict[str, Any]]:
    spans = tmp_path / "spans.json"
    env = {**os.environ, "SKIPLOCK_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-m", "tests.apps.otel_app", str(spans)],
        env=env,
        cwd=ROOT,
        check=True,
        timeout=60,
    )
    loaded: list[dict[str, Any]] = json.loads(spans.read_text())
    return loaded


@pytest.mark.slow
async def test_enqueue_and_run_in_two_processes_are_one_trace(
    app: skiplock.App, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    web = otel_app.app.tracing.tracer  # type: ignore[union-attr]  # the same provider
    with web.start_as_current_span("POST /orders") as request:  # the request enqueuing
        ok = await otel_app.traced.using(correlation_id="order-7").aenqueue(SENTINEL)
        bad = await otel_app.traced_fail.aenqueue(SENTINEL)
    sends = [s for s in exporter.get_finished_spans() if s.name == "send default"]
    assert len(sends) == 2 and all(s.parent is not None for s in sends)
    theirs = run_worker_elsewhere(app.url, tmp_path)

    trace_id = f"{request.get_span_context().trace_id:032x}"
    for send, job in zip(sends, (ok, bad), strict=True):
        ctx = send.get_span_context()
        assert send.kind.name == "PRODUCER" and f"{ctx.trace_id:032x}" == trace_id
        assert send.attributes is not None
        assert send.attributes["messaging.system"] == "skiplock"
        assert send.attributes["messaging.operation.type"] == "send"
        assert send.attributes["messaging.destination.name"] == "default"
        assert send.attributes["messaging.message.id"] == str(job.id)
        (run,) = [s for s in theirs if s["attributes"].get("messaging.message.id") == str(job.id)]
        assert run["name"] == "process default" and run["kind"] == "CONSUMER"
        assert run["trace_id"] == trace_id  # one trace across the two processes
        assert run["parent_id"] == f"{ctx.span_id:016x}"
        assert run["links"] == [f"{trace_id}/{ctx.span_id:016x}"]
        attributes = run["attributes"]
        assert attributes["messaging.operation.type"] == "process"
        assert attributes["messaging.destination.name"] == "default"
        assert attributes["messaging.client.id"] == "otel-worker"
        assert attributes["skiplock.attempt"] == 1
    (run_ok,) = [s for s in theirs if s["attributes"]["skiplock.task"] == "traced"]
    assert run_ok["status"] == "UNSET"
    assert run_ok["attributes"]["messaging.message.conversation_id"] == "order-7"
    (run_bad,) = [s for s in theirs if s["attributes"]["skiplock.task"] == "traced_fail"]
    assert run_bad["status"] == "ERROR" and run_bad["attributes"]["error.type"].endswith(
        "ValueError"
    )
    assert run_bad["events"] == []  # no exception event: its message quotes the argument
    everything = json.dumps(theirs) + repr([dict(s.attributes or {}) for s in sends])
    assert SENTINEL not in everything
    assert SENTINEL not in (run_bad["status_description"] or "")


async def test_an_untraced_app_stores_no_context(db_url: str) -> None:
    plain = skiplock.App(db_url)
    await plain.migrate()

    @plain.task(name="t")
    def t() -> None: ...

    handle = await t.aenqueue()
    backend = await plain.backend()
    claimed = await backend.job_get_available(
        skiplock._backends.params.ClaimParams(None, 1, "w", "tok", 60.0, 5.0)
    )
    assert [c.id for c in claimed] == [handle.id] and claimed[0].trace_context is None
    await plain.close()
