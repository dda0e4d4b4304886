"""Per-task skiplock options (what Django Tasks lacks): retries, backoff, timeout, unique key.

``@skiplock_options(max_attempts=5, timeout=30)`` goes *under* ``@task``; the options are kept
on the function and read when the backend registers the task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ...errors import ConfigurationError

F = TypeVar("F", bound=Callable[..., Any])

ATTRIBUTE = "_skiplock_options"
REGISTERED = frozenset(
    {
        "max_attempts",
        "timeout",
        "retry",
        "permanent",
        "visibility_timeout",
        "breaker",
        "keep_result",
        "max_reclaims",
    }
)
"""Options of the skiplock task itself (``app.task(...)``)."""
PER_JOB = frozenset({"unique_key", "on_duplicate", "unique_while"})
"""Options applied at each enqueue (``task.using(...)``)."""
ALLOWED = REGISTERED | PER_JOB


def skiplock_options(**options: Any) -> Callable[[F], F]:
    """Attach skiplock Task options to a function that ``@task`` will wrap."""
    unknown = sorted(set(options) - ALLOWED)
    if unknown:
        raise ConfigurationError(
            f"skiplock_options: unknown option(s) {unknown}; valid: {sorted(ALLOWED)}"
        )

    def attach(fn: F) -> F:
        setattr(fn, ATTRIBUTE, dict(options))
        return fn

    return attach


MAX_RECLAIMS = 2
"""Default of how many times a one-attempt task is run again after its worker died under it
(SIGKILL, OOM, a lost host): a worker's death is not the task's failure, but a task that
kills its worker every time still ends, FAILED "lease expired", after ``1 + MAX_RECLAIMS``."""


def registered_options(task: Any) -> dict[str, Any]:
    """The skiplock task options of Django ``task``.

    Django tasks get one attempt, as Django's own backends give them. An exception (or a
    timeout) fails that attempt for good (``permanent``); the attempts the row has beyond it,
    ``max_reclaims``, are spent only by reclaims of a lease whose worker died. A task given
    ``max_attempts`` > 1 retries by skiplock's rules, each reclaim spending an attempt.
    """
    chosen = {k: v for k, v in getattr(task.func, ATTRIBUTE, {}).items() if k in REGISTERED}
    reclaims = chosen.pop("max_reclaims", MAX_RECLAIMS)
    if not isinstance(reclaims, int) or isinstance(reclaims, bool) or not 0 <= reclaims <= 100:
        raise ConfigurationError(
            f"{task.module_path}: max_reclaims must be an int in 0..100 (got {reclaims!r})"
        )
    attempts = chosen.get("max_attempts", 1)
    if attempts == 1:
        return {**chosen, "max_attempts": 1 + reclaims, "permanent": (BaseException,)}
    return {"max_attempts": 1, **chosen}


def per_job_options(fn: Callable[..., Any]) -> dict[str, Any]:
    """``fn``'s enqueue options (a unique key and what a duplicate does)."""
    return {k: v for k, v in getattr(fn, ATTRIBUTE, {}).items() if k in PER_JOB}
