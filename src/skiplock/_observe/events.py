"""A job's life as log events on ``skiplock.jobs``: one each when it starts, when its attempt's
outcome is recorded (succeeded, retry, snoozed, released, cancelled, dead: logged after the
write took it, so a lease lost never logs "succeeded") and when its expired lease is
reclaimed. The routine ones (started, succeeded, snoozed, released) are DEBUG: at INFO a
worker logs one summary line an interval instead (``summary.py``); the failures (retry,
cancelled, dead, reclaimed) are WARNING or ERROR, each on its own line. Plain text reads
as a sentence; the fields ride on the record for ``JsonFormatter``. Never arguments,
results or error messages; the error's type only.

Each call checks the level first, so a worker logging at INFO pays one comparison a job.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from .._attempt import Decision
from .._job import ClaimedJob, Disposition, ReclaimedJob
from .outcomes import OUTCOMES

log = logging.getLogger("skiplock.jobs")


def _fields(job: ClaimedJob | ReclaimedJob, worker: str) -> dict[str, object]:
    return {
        "job_id": job.id,
        "task": job.task,
        "queue": job.queue,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "worker": worker,
        "correlation_id": job.correlation_id,
    }


def started(job: ClaimedJob, worker: str) -> None:
    if log.isEnabledFor(logging.DEBUG):
        fields = {"event": "started", **_fields(job, worker)}
        log.debug(
            "job %d started: task=%s queue=%s attempt=%d/%d",
            job.id,
            job.task,
            job.queue,
            job.attempt,
            job.max_attempts,
            extra=fields,
        )


def on_recorded(
    job: ClaimedJob, decision: Decision, duration_s: float, worker: str
) -> Callable[[], None] | None:
    """The ``ended`` event of an attempt, to log once its outcome is recorded (None while
    that level is off: no closure a job)."""
    if not log.isEnabledFor(OUTCOMES[decision.disposition].level):
        return None
    return functools.partial(ended, job, decision, duration_s, worker)


def ended(job: ClaimedJob, decision: Decision, duration_s: float, worker: str) -> None:
    outcome = OUTCOMES[decision.disposition]
    event, level = outcome.event, outcome.level
    if not log.isEnabledFor(level):
        return
    fields = {"event": event, **_fields(job, worker), "duration_s": round(duration_s, 6)}
    detail = ""
    if decision.error is not None:
        fields["error_type"] = str(decision.error.get("type") or "")
        detail += f" error_type={fields['error_type']}"
    if decision.disposition in (Disposition.RETRY, Disposition.SNOOZE):
        fields["retry_in_s"] = round(decision.delay_s, 3)
        detail += f" retry_in={decision.delay_s:.1f}s"
    log.log(
        level,
        "job %d %s after %.3fs: task=%s queue=%s attempt=%d/%d%s",
        job.id,
        event,
        duration_s,
        job.task,
        job.queue,
        job.attempt,
        job.max_attempts,
        detail,
        extra=fields,
    )


def reclaimed(job: ReclaimedJob, worker: str, gone: bool = False) -> None:
    """A job whose lease expired (its worker, ``lost_by``, stopped heartbeating), or, with
    ``gone``, whose worker the registry shows dead (``_worker/dead_workers.py``)."""
    if not log.isEnabledFor(logging.WARNING):
        return
    fields = {"event": "reclaimed", **_fields(job, worker), "lost_by": job.lost_by}
    why = "its worker %s is gone" if gone else "its lease expired (worker %s stopped heartbeating)"
    log.warning(
        "job %d reclaimed: " + why + "; now %s: task=%s queue=%s attempt=%d/%d",
        job.id,
        job.lost_by,
        job.state.value,
        job.task,
        job.queue,
        job.attempt,
        job.max_attempts,
        extra=fields,
    )
