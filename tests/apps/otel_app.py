"""An app traced with the OpenTelemetry SDK's in-memory exporter. Run as a script (``python -m
tests.apps.otel_app SPANS.json``), it works every job in burst mode and writes the spans it
recorded to SPANS.json, so a test can see a second process's spans."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import skiplock
from skiplock.otel import instrument

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
instrument(app, tracer_provider=provider)


@app.task(name="traced")
async def traced(secret: str) -> str:
    return secret


@app.task(name="traced_fail", max_attempts=1)
async def traced_fail(secret: str) -> None:
    raise ValueError(f"cannot handle {secret}")


def as_dict(span: ReadableSpan) -> dict[str, Any]:
    """What a test compares across processes: ids as hex, attributes, links, status."""
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "links": [
            f"{link.context.trace_id:032x}/{link.context.span_id:016x}" for link in span.links
        ],
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
        "status_description": span.status.description,
        "events": [event.name for event in span.events],
    }


async def work_in_burst() -> None:
    await skiplock.Worker(app, name="otel-worker").run(burst=True)
    await app.close()


if __name__ == "__main__":
    asyncio.run(work_in_burst())
    spans = [as_dict(span) for span in exporter.get_finished_spans()]
    with open(sys.argv[1], "w") as out:
        json.dump(spans, out)
