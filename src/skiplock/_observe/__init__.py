"""Observability: what a worker and an App tell the people watching them.

Private by content (import the public names from ``skiplock``): the worker's meter
(``meter``), the database gauges and their refresher (``gauges``), the live-worker registry
row (``presence``), a job's life as log events (``events``), the tiny HTTP endpoint
(``http``), the health numbers as typed records (``stats``: ``Stats``, ``StatsGroup``,
``WorkerInfo``, exported by ``skiplock``), one outcome word per ``Disposition``
(``outcomes``), and the plug-in protocols (``plugins``) the exporters implement:
``skiplock.prometheus`` (a ``MetricsExporter``) and ``skiplock.otel`` (a ``Tracer``).

It sits below the worker: nothing here imports ``skiplock._worker``, and nothing here imports
an extra (prometheus-client, OpenTelemetry); ``tests/test_layers_extras.py`` holds both.
This ``__init__`` imports nothing, so a backend can import ``_observe.stats`` without
loading the rest.
"""
