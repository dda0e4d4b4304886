"""The seam tracing hooks into: what enqueue and the runner call when an app is traced.

``App.tracing`` is None unless ``skiplock.otel.instrument(app)`` set it, so an untraced app
pays one attribute check per enqueue batch and per job. The core never imports OpenTelemetry;
``skiplock/otel.py`` (the ``otel`` extra) implements this protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ._attempt import Decision
    from ._job import ClaimedJob, NewJob


class Tracing(Protocol):
    def enqueue(
        self, jobs: Sequence[NewJob]
    ) -> AbstractContextManager[Callable[[Sequence[int]], None]]:
        """Around an insert: open the send span, store its context on each job
        (``trace_context``); the yielded callback is told the ids inserted."""
        ...

    def run(
        self, job: ClaimedJob, worker: str
    ) -> AbstractContextManager[Callable[[Decision], None]]:
        """Around one attempt: open the process span, a child of (and linked to) the job's
        stored context, current while the task runs; the callback is told how it ended."""
        ...
