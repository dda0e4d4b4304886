"""Run skiplock's migrations from Django's ``migrate`` for every backend on that database."""

from __future__ import annotations

from typing import Any


def apply_skiplock_migrations(apps: Any, schema_editor: Any) -> None:
    """RunPython body: each skiplock backend stored in this alias migrates its schema."""
    from django.tasks import task_backends

    from .backend import SkiplockBackend

    alias = schema_editor.connection.alias
    for backend in task_backends.all():
        if isinstance(backend, SkiplockBackend) and backend.database == alias:
            backend.app.run_sync(backend.app.migrate())
