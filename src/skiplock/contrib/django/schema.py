"""Run skiplock's migrations from Django's ``migrate``: for every skiplock backend on that
database, and for the ``@periodic`` slot ledger of a django-tasks-db backend there (its
default schema, when no skiplock backend shares the database: see ``_ledger.py``)."""

from __future__ import annotations

import asyncio
from typing import Any


def apply_skiplock_migrations(apps: Any, schema_editor: Any) -> None:
    """RunPython body: each skiplock backend stored in this alias migrates its schema."""
    from django.tasks import task_backends

    from ..._app import App
    from ._ledger import default_ledger_url, is_tasks_db, skiplock_backend_on, tasks_db_database
    from .backend import SkiplockBackend

    alias = schema_editor.connection.alias
    for backend in task_backends.all():
        if isinstance(backend, SkiplockBackend) and backend.database == alias:
            backend.app.run_sync(backend.app.migrate())
    served = any(is_tasks_db(b) for b in task_backends.all())
    if served and tasks_db_database() == alias and skiplock_backend_on(alias) is None:
        ledger = App(default_ledger_url(alias))

        async def migrate() -> None:
            try:
                await ledger.migrate()
            finally:
                await ledger.close()

        asyncio.run(migrate())
