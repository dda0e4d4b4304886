"""How long finished task results are kept: a documented setting, not a silent delete.

``TASKS[alias]["OPTIONS"]["result_retention"]`` (seconds, default 7 days) keeps SUCCESSFUL
results and cancelled ones; ``"dead_retention"`` (default 30 days) keeps FAILED ones, longer,
for review and requeue. Every worker of the backend prunes past them once a minute, in bounded
batches; ``manage.py prune_task_results [--dry-run]`` does it now (or shows what it would).
"""

from __future__ import annotations

import math
from typing import Any

DEFAULT_RESULT_RETENTION_S = 7 * 86400.0
DEFAULT_DEAD_RETENTION_S = 30 * 86400.0
MAX_RETENTION_S = 100 * 365 * 86400.0

OPTIONS = {
    "result_retention": "seconds SUCCESSFUL (and cancelled) results are kept (default 7 days)",
    "dead_retention": "seconds FAILED results are kept (default 30 days)",
}


def retention_problem(name: str, value: Any) -> str | None:
    """Why ``value`` is not a valid ``name`` option (None: it is)."""
    if value is None:
        return None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and math.isfinite(value) and 0 < value <= MAX_RETENTION_S:
        return None
    return f"{name} = {value!r}: must be a number of seconds > 0 (at most 100 years)"


def retention_of(options: Any) -> tuple[float, float]:
    """(results, dead) retention in seconds of a backend's OPTIONS (defaults filled in)."""
    options = options if isinstance(options, dict) else {}
    for name in OPTIONS:
        problem = retention_problem(name, options.get(name))
        if problem is not None:
            from ...errors import ConfigurationError

            raise ConfigurationError(problem)
    return (
        float(options.get("result_retention") or DEFAULT_RESULT_RETENTION_S),
        float(options.get("dead_retention") or DEFAULT_DEAD_RETENTION_S),
    )
