"""Django's attempts, reclaims aside, and ``@task(max_attempts=, backoff=)`` (new-features#142).

A Django task has ``N`` attempts (``max_attempts``, default 1) that what the task does spends
(an exception, its timeout), and ``R`` reclaims (``max_reclaims``, default 2) that its worker's
death spends (a lease that expired). The job row gets ``N + R`` attempts, so the lease sweep,
which only counts, ends a task that kills its worker every time after ``N + R`` runs; a
failure ends it once the attempts it spent itself, ``attempt - reclaims``, reach ``N``.

The runner decides each failure before the worker classifies it (``decide``) and records the
decision under the job's (id, attempt); the worker's ``classify`` reads it back through the
skiplock task's ``permanent`` (``FinalForDjango``: an ``isinstance`` that answers "this
attempt is final") and ``retry`` (``DecidedDelay``: the delay ``backoff`` returned). Both read
the running job from its context, which the worker sets for the attempt's whole life.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from typing import Any

from ..._config import RetryPolicy
from ..._job import current_job
from ..._limits import MAX_SECONDS

log = logging.getLogger("skiplock.contrib.django")

_DECIDED: dict[tuple[int, int], float | str | None] = {}
"""(job id, attempt) -> the retry delay decided for that failure, ``BY_POLICY`` (retried by
the task's own retry policy), or None: final."""
BY_POLICY = "by-policy"
_MAX_DECIDED = 10_000
"""Decisions the worker never read back (a sync task's thread returning after its timeout was
recorded) are dropped oldest first beyond this."""
_MISSING = object()

LOST = re.compile(
    r"^(?:lease expired \(worker (?P<expired>.*) stopped heartbeating\)"
    r"|worker (?P<exited>.+?) (?:exited; released by its supervisor"
    r"|(?:exited \(its process is gone\)|stopped beating \([^)]*\)); reclaimed by worker .+))$"
)
"""The error record of an attempt lost with its worker (each is a reclaim): the lease sweep
writes the first form; a ``--processes`` supervisor that saw its child exit, the second; a
worker that found another's process gone, or its registry row silent, and took its leases at
once (``_worker/dead_workers.py``), the third."""


def lost_by(message: object) -> str | None:
    """The worker an attempt was lost with, if its error record says so (else None)."""
    found = LOST.match(str(message or ""))
    return found.group("expired") or found.group("exited") if found else None


ATTEMPTS: dict[str, int] = {}
"""Each registered Django task's own attempts (by skiplock task name), for a failure the worker
sees before the runner decided it: a sync task's timeout, its thread still running."""


def _key() -> tuple[int, int] | None:
    try:
        job = current_job()
    except LookupError:
        return None
    return job.id, job.attempt


class _FinalForDjango(type):
    def __instancecheck__(cls, instance: object) -> bool:
        try:
            job = current_job()
        except LookupError:
            return False
        decided = _DECIDED.get((job.id, job.attempt), _MISSING)
        if decided is _MISSING:  # undecided (see ATTEMPTS): reclaims unknown, count them in
            return job.attempt >= ATTEMPTS.get(job.task, 1)
        return decided is None


class FinalForDjango(BaseException, metaclass=_FinalForDjango):
    """Never raised. In a skiplock task's ``permanent``, it matches the failure of an attempt
    the runner decided is final (Django's attempts spent, or ``backoff`` returned None)."""


class DecidedDelay(RetryPolicy):
    """The delay ``backoff`` returned for this failure (the default policy's if none was
    decided: a sync task's timeout the worker saw before its thread returned). Used only
    with ``backoff``; a task without one keeps its own policy."""

    def delay(self, attempt: int, rng: Any = None) -> float:
        key = _key()
        decided = _DECIDED.pop(key, _MISSING) if key is not None else _MISSING
        if isinstance(decided, float):
            return decided
        return super().delay(attempt, rng)


def _record(key: tuple[int, int], delay: float | str | None) -> None:
    while len(_DECIDED) >= _MAX_DECIDED:
        _DECIDED.pop(next(iter(_DECIDED)))
    _DECIDED[key] = delay


def needs_reclaims(attempts: int) -> bool:
    """Whether deciding this failure needs the reclaims of the running job read from its row
    (only when it may be the task's last attempt of its own)."""
    return attempts > 1 and current_job().attempt >= attempts


def reclaims_in(errors: list[dict[str, Any]]) -> int:
    """How many attempts the row's error records say were lost with their worker."""
    return sum(1 for e in errors if lost_by(e.get("message")) is not None)


def decide(
    exc: BaseException,
    result: Any,
    *,
    attempts: int,
    backoff: Callable[[BaseException, Any], Any] | None,
    reclaims: int = 0,
) -> None:
    """Decide this failure of the running job: final once the task's own attempts are spent
    or ``backoff`` says None; else retried after what ``backoff`` returned (or by the task's
    retry policy when it has no ``backoff``)."""
    job = current_job()
    key = (job.id, job.attempt)
    if job.attempt - reclaims >= attempts:
        _record(key, None)
        return
    if backoff is None:
        _record(key, BY_POLICY)  # retried; the skiplock task's own policy decides the delay
        return
    try:
        delay = backoff(exc, result)
    except Exception:
        log.exception("backoff of %s raised: the task is not retried", job.task)
        _record(key, None)
        return
    if delay is None:
        _record(key, None)
        return
    ok = isinstance(delay, int | float) and not isinstance(delay, bool)
    if not ok or not math.isfinite(delay) or not 0 <= delay <= MAX_SECONDS:
        log.error(
            "backoff of %s returned %r (not seconds in 0..%g, nor None): not retried",
            job.task,
            delay,
            MAX_SECONDS,
        )
        _record(key, None)
        return
    _record(key, float(delay))
