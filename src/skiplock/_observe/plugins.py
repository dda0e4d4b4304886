"""The plug-in seams of observability: what an exporter *receives* from the core.

The core never imports an extra. An exporter is a module of its own (``skiplock.prometheus``,
``skiplock.otel``) implementing one of these protocols over public names and ``_observe/``
only, and the worker or the App is handed an instance:

- a ``MetricsExporter`` gets, at each scrape of ``/metrics``, the worker's ``Meter`` (its
  own counters and histograms) and the ``GaugeCache`` (the database gauges, filled by the
  registry's leader) and returns the body; ``Worker.metrics_exporter`` holds it. A worker
  given none while ``metrics_port`` is set takes ``default_metrics_exporter()``: the factory
  the package's edge registered (``skiplock/__init__.py`` registers Prometheus, the one
  ``--metrics-port`` always served, loaded only when asked for), so nothing below the edge
  names an exporter and a worker without metrics never loads prometheus-client;
- a ``Tracer`` is the ``_tracing.Tracing`` seam (``App.tracing``, set by
  ``skiplock.otel.instrument(app)``): the enqueue path and the runner call it; it is told
  how an attempt ended through a ``Decision`` (``_attempt``'s record, below the worker).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .._attempt import Decision
from .._tracing import Tracing as Tracer
from ..errors import ConfigurationError
from .gauges import GaugeCache
from .meter import Meter

__all__ = [
    "Decision",
    "MetricsExporter",
    "Tracer",
    "default_metrics_exporter",
    "register_default_metrics_exporter",
]


class MetricsExporter(Protocol):
    """Turns a worker's meter and the gauges into the body ``/metrics`` answers."""

    @property
    def content_type(self) -> str: ...

    def render(self, meter: Meter | None, gauges: GaugeCache) -> bytes: ...


_default: Callable[[], MetricsExporter] | None = None


def register_default_metrics_exporter(factory: Callable[[], MetricsExporter]) -> None:
    """Set what a worker with a metrics port and no exporter of its own builds (the edge's
    choice: ``skiplock/__init__.py`` registers Prometheus)."""
    global _default
    _default = factory


def default_metrics_exporter() -> MetricsExporter:
    """The registered default (Prometheus: a ConfigurationError naming its extra if it is
    missing)."""
    if _default is None:
        raise ConfigurationError("metrics_port is set but no metrics exporter is registered")
    return _default()
