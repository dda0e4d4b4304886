"""OpenTelemetry spans for skiplock (``pip install 'skiplock[otel]'``).

``instrument(app)`` makes every enqueue a ``send`` span (kind PRODUCER) and every attempt a
``process`` span (kind CONSUMER). The send span's W3C trace context is stored on each job
(``trace_context``), so the attempt's span, in whatever process runs it, is a child of the
enqueue's and links to it: enqueue and run are one trace. Attributes follow the messaging
semantic conventions (``messaging.system``, ``messaging.operation.type``,
``messaging.destination.name``, ``messaging.message.id``, ...); arguments, results and error
messages never become attributes (a failed attempt's span carries its error type only).

Configure the SDK (exporter, sampler) as for any application; skiplock only asks the API for
a tracer::

    from skiplock.otel import instrument
    instrument(app)                          # the global TracerProvider
    instrument(app, tracer_provider=provider)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

try:
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode, TracerProvider
except ImportError as exc:  # pragma: no cover - the extra is missing
    from .errors import ConfigurationError

    raise ConfigurationError(
        "OpenTelemetry spans need opentelemetry-api: pip install 'skiplock[otel]'"
    ) from exc

from ._job import ClaimedJob, NewJob
from ._observe.outcomes import FAILED

if TYPE_CHECKING:
    from ._app import App
    from ._attempt import Decision

__all__ = ["SkiplockTracing", "instrument", "uninstrument"]

SYSTEM = "skiplock"


def instrument(app: App, *, tracer_provider: TracerProvider | None = None) -> None:
    """Trace ``app``'s enqueues and, in its workers, every attempt."""
    from . import __version__

    tracer = trace.get_tracer("skiplock", __version__, tracer_provider=tracer_provider)
    app.tracing = SkiplockTracing(tracer)


def uninstrument(app: App) -> None:
    app.tracing = None


def _carrier(context: Any = None) -> str:
    """The current (or given) context as W3C headers, JSON (traceparent, tracestate)."""
    headers: dict[str, str] = {}
    propagate.inject(headers, context=context)
    return json.dumps(headers, separators=(",", ":"))


def _extract(stored: str | None) -> Any:
    """The context stored on a job (an empty one if none, or if it does not parse)."""
    try:
        headers = json.loads(stored) if stored else {}
    except ValueError:
        headers = {}
    return propagate.extract(headers if isinstance(headers, dict) else {})


class SkiplockTracing:
    """The ``_tracing.Tracing`` hooks on one OpenTelemetry tracer."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    @contextmanager
    def enqueue(self, jobs: Sequence[NewJob]) -> Iterator[Callable[[Sequence[int]], None]]:
        queues = sorted({j.queue for j in jobs})
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": ",".join(queues),
        }
        if len(jobs) != 1:
            attributes["messaging.batch.message_count"] = len(jobs)
        else:
            attributes["skiplock.task"] = jobs[0].task
            if jobs[0].correlation_id:
                attributes["messaging.message.conversation_id"] = jobs[0].correlation_id
        name = f"send {queues[0]}" if len(queues) == 1 else "send"
        with self.tracer.start_as_current_span(
            name, kind=SpanKind.PRODUCER, attributes=attributes, record_exception=False
        ) as span:
            stored = _carrier()
            for job in jobs:
                job.trace_context = stored

            def inserted(ids: Sequence[int]) -> None:
                if len(ids) == 1:
                    span.set_attribute("messaging.message.id", str(ids[0]))

            yield inserted

    @contextmanager
    def run(self, job: ClaimedJob, worker: str) -> Iterator[Callable[[Decision], None]]:
        parent = _extract(job.trace_context)
        linked = trace.get_current_span(parent).get_span_context()
        links = [Link(linked)] if linked.is_valid else []
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": job.queue,
            "messaging.message.id": str(job.id),
            "messaging.client.id": worker,
            "skiplock.task": job.task,
            "skiplock.attempt": job.attempt,
        }
        if job.correlation_id:
            attributes["messaging.message.conversation_id"] = job.correlation_id
        span = self.tracer.start_span(
            f"process {job.queue}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
            record_exception=False,  # an exception's message may quote the job's arguments
        )

        def ended(decision: Decision) -> None:
            span.set_attribute("skiplock.outcome", decision.disposition.value)
            if decision.disposition in FAILED and decision.error is not None:
                error_type = str(decision.error.get("type") or "error")
                span.set_attribute("error.type", error_type)
                span.set_status(Status(StatusCode.ERROR, error_type))

        with trace.use_span(span, end_on_exit=True, record_exception=False):
            yield ended
