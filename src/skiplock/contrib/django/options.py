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


def registered_options(fn: Callable[..., Any]) -> dict[str, Any]:
    """``fn``'s task options (Django tasks default to one attempt, as Django's own do)."""
    chosen = getattr(fn, ATTRIBUTE, {})
    return {"max_attempts": 1, **{k: v for k, v in chosen.items() if k in REGISTERED}}


def per_job_options(fn: Callable[..., Any]) -> dict[str, Any]:
    """``fn``'s enqueue options (a unique key and what a duplicate does)."""
    return {k: v for k, v in getattr(fn, ATTRIBUTE, {}).items() if k in PER_JOB}
