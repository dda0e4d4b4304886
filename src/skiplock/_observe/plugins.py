"""The plug-in seams of observability: what an exporter *receives* from the core.

The core never imports an extra. An exporter is a module of its own (``skiplock.prometheus``,
``skiplock.otel``) implementing one of these protocols over public names and ``_observe/``
only, and the worker or the App is handed an instance:

- a ``MetricsExporter`` gets, at each scrape of ``/metrics``, the worker's ``Meter`` (its
  own counters and histograms) and the ``GaugeCache`` (the database gauges, filled by the
  registry's leader) and returns the body; ``Worker.metrics_exporter`` holds it. A worker
  given none while ``metrics_port`` is set takes ``default_metrics_exporter()`` (Prometheus,
  the one ``--metrics-port`` always served): the one place the core names an exporter,
  loaded only then, so a worker without metrics never loads prometheus-client;
- a ``Tracer`` is the ``_tracing.Tracing`` seam (``App.tracing``, set by
  ``skiplock.otel.instrument(app)``): the enqueue path and the runner call it; it is told
  how an attempt ended through a ``Decision``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .._job import Disposition
from .._tracing import Tracing as Tracer
from .gauges import GaugeCache
from .meter import Meter

__all__ = ["Decision", "MetricsExporter", "Tracer", "default_metrics_exporter"]


class Decision(Protocol):
    """How an attempt ended, as events and tracers read it (the worker's
    ``_worker.classify.Decision`` is one; _observe/ does not import the worker)."""

    @property
    def disposition(self) -> Disposition: ...
    @property
    def delay_s(self) -> float: ...
    @property
    def error(self) -> Mapping[str, Any] | None: ...


class MetricsExporter(Protocol):
    """Turns a worker's meter and the gauges into the body ``/metrics`` answers."""

    @property
    def content_type(self) -> str: ...

    def render(self, meter: Meter | None, gauges: GaugeCache) -> bytes: ...


def default_metrics_exporter() -> MetricsExporter:
    """The Prometheus exporter (``skiplock[prometheus]``): a ConfigurationError naming the
    extra if it is missing."""
    from ..prometheus import PrometheusExporter

    return PrometheusExporter()
