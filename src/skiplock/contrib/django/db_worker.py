"""django-tasks-concurrent's ``db_worker`` module names, so a project's
``from django_tasks_concurrent.db_worker import ...`` changes only its package name."""

from __future__ import annotations

from .resilience import RECONNECT_MAX_BACKOFF_SECONDS, install_resilient_run

__all__ = ["RECONNECT_MAX_BACKOFF_SECONDS", "install_resilient_run"]
