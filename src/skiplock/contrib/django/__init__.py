"""skiplock for Django's task framework: add ``skiplock.contrib.django`` to INSTALLED_APPS and
set ``TASKS = {"default": {"BACKEND": "skiplock.contrib.django.SkiplockBackend"}}``.

Names resolve lazily so that importing this package does not import Django's settings.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "SkiplockBackend": ".backend",
    "skiplock_options": ".options",
    "periodic": ".periodic_tasks",
    "PeriodicTask": ".periodic_tasks",
    "registered_periodic_tasks": ".periodic_tasks",
    "defer_periodic_tasks": ".scheduler",
    "run_scheduler_thread": ".scheduler",
    "run_worker": ".worker",
    "run_worker_async": ".worker",
    "WorkerHandle": ".worker",
    "SkiplockDjangoTask": ".task_class",
    "WorkerOptions": ".worker",
    "ConcurrentWorker": ".worker",
    "install_resilient_run": ".resilience",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module, __name__), name)
