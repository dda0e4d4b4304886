"""One outcome vocabulary: what each way an attempt ends (a ``Disposition``) is called where.

Each surface a person reads names an attempt's end, and the words were chosen over time, so
they differ; they are user-visible (metric label values, log event names, JSON keys, span
attributes: docs/operations/metrics.md, docs/operations/cli.md, dashboards and alerts built
on them), so they stay as they are, and this one table says them all. Events, the meter's
exporter, the stats records, the Prometheus exporter and the tracer read it; none keeps a
table keyed by ``Disposition`` of its own.

==========  ==============  ===========  ========  ==========  ======
disposition ``label``       ``event``    level     ``final``   failed
==========  ==============  ===========  ========  ==========  ======
SUCCEED     succeeded       succeeded    DEBUG     completed
RETRY       retried         retry        WARNING               yes
SNOOZE      snoozed         snoozed      DEBUG
RELEASE     released        released     DEBUG
PARK        parked          parked       DEBUG
CANCEL      cancelled       cancelled    WARNING   cancelled
DEAD        dead            dead         ERROR     dead        yes
==========  ==============  ===========  ========  ==========  ======

- ``label``: the ``outcome`` label of ``skiplock_jobs_total`` (this worker's attempts);
- ``event``: the ``event`` field (and the verb of the message) of the ``ended`` log event on
  ``skiplock.jobs``, logged at ``level``: the routine ends at DEBUG (a busy worker's INFO
  carries one summary line an interval instead, ``summary.py``), the failures one by one;
- ``final``: for an attempt that ends the job, the word the window's numbers use: the
  ``StatsGroup`` field (``skiplock stats --json``) and the ``outcome`` label of
  ``skiplock_jobs_finished`` (None: the job goes on);
- ``failed``: the attempt raised (the span's error status; ``StatsGroup.failed`` counts these);
- ``Disposition``'s own value (succeeded, retry, snooze, release, park, cancelled, dead) is what the
  completer writes and the span's ``skiplock.outcome`` attribute carries.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .._job import Disposition


@dataclass(frozen=True, slots=True)
class Outcome:
    label: str
    event: str
    level: int
    final: str | None = None
    failed: bool = False


OUTCOMES: dict[Disposition, Outcome] = {
    Disposition.SUCCEED: Outcome("succeeded", "succeeded", logging.DEBUG, final="completed"),
    Disposition.RETRY: Outcome("retried", "retry", logging.WARNING, failed=True),
    Disposition.SNOOZE: Outcome("snoozed", "snoozed", logging.DEBUG),
    Disposition.RELEASE: Outcome("released", "released", logging.DEBUG),
    Disposition.PARK: Outcome("parked", "parked", logging.DEBUG),
    Disposition.CANCEL: Outcome("cancelled", "cancelled", logging.WARNING, final="cancelled"),
    Disposition.DEAD: Outcome("dead", "dead", logging.ERROR, final="dead", failed=True),
}
"""Each way an attempt ends, in every surface's words (the module docstring's table)."""

FINISHED: tuple[str, ...] = tuple(o.final for o in OUTCOMES.values() if o.final is not None)
"""The window's words for a job's end, in order: ("completed", "cancelled", "dead")."""

FAILED: frozenset[Disposition] = frozenset(d for d, o in OUTCOMES.items() if o.failed)
"""The attempts that raised (retried or dead)."""
