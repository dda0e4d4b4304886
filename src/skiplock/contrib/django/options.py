"""Per-task skiplock options (what Django Tasks lacks): retries, backoff, timeout, unique key.

``@skiplock_options(max_attempts=5, timeout=30)`` goes *under* ``@task``; the options are kept
on the function and read when the backend registers the task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..._task_options import django_options
from ...errors import ConfigurationError

F = TypeVar("F", bound=Callable[..., Any])

ATTRIBUTE = "_skiplock_options"
REGISTERED = django_options("task") | {"max_reclaims"}
"""Options of the skiplock task itself (``app.task(...)``; ``_task_options`` says which),
and Django's own ``max_reclaims``."""
PER_JOB = django_options("enqueue")
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
    """The skiplock task options of Django ``task`` (see ``retries.py``).

    Django tasks get one attempt unless given more (``@task(max_attempts=)`` or
    ``@skiplock_options(max_attempts=)``), as Django's own backends give them; the row gets
    ``max_reclaims`` more, spent only by reclaims of a lease whose worker died. An exception
    or a timeout of the task's last attempt of its own is final (``FinalForDjango``).
    """
    from .retries import ATTEMPTS, DecidedDelay, FinalForDjango

    chosen = {k: v for k, v in getattr(task.func, ATTRIBUTE, {}).items() if k in REGISTERED}
    reclaims = chosen.pop("max_reclaims", MAX_RECLAIMS)
    where = task.module_path
    if not isinstance(reclaims, int) or isinstance(reclaims, bool) or not 0 <= reclaims <= 100:
        raise ConfigurationError(
            f"{where}: max_reclaims must be an int in 0..100 (got {reclaims!r})"
        )
    attempts = django_attempts(task)
    ATTEMPTS[where] = attempts
    backoff = getattr(task, "backoff", None)
    if backoff is not None:
        if not callable(backoff):
            raise ConfigurationError(f"{where}: backoff must be callable (got {backoff!r})")
        if "retry" in chosen:
            raise ConfigurationError(
                f"{where}: give @task(backoff=) or @skiplock_options(retry=), not both"
            )
        chosen["retry"] = DecidedDelay()
    permanent = (FinalForDjango, *chosen.get("permanent", ()))
    return {**chosen, "max_attempts": attempts + reclaims, "permanent": permanent}


def django_attempts(task: Any) -> int:
    """The attempts ``task``'s own failures may spend: ``@task(max_attempts=)``, else
    ``@skiplock_options(max_attempts=)``, else 1 (a ConfigurationError if both disagree)."""
    from ..._limits import MAX_ATTEMPTS, check_int

    own = getattr(task, "max_attempts", None)
    chosen = getattr(task.func, ATTRIBUTE, {}).get("max_attempts")
    if own is not None and chosen is not None and own != chosen:
        raise ConfigurationError(
            f"{task.module_path}: @task(max_attempts={own!r}) and "
            f"@skiplock_options(max_attempts={chosen!r}) disagree; give one"
        )
    value = own if own is not None else chosen if chosen is not None else 1
    return check_int(f"{task.module_path}: max_attempts", value, 1, MAX_ATTEMPTS - 100)


def per_job_options(fn: Callable[..., Any]) -> dict[str, Any]:
    """``fn``'s enqueue options (a unique key and what a duplicate does)."""
    return {k: v for k, v in getattr(fn, ATTRIBUTE, {}).items() if k in PER_JOB}
