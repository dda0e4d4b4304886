"""The Django test project (``tests/django/project/settings.py``) on PostgreSQL (a schema of its
own per run) or SQLite files, chosen by ``SKIPLOCK_DJANGO_DB`` (``make test`` runs both);
skipped without Django. The settings read the environment this module sets, so the worker
processes a test spawns (``spawn_worker``) load the same project and databases."""

from __future__ import annotations

import importlib.util
import os
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

if importlib.util.find_spec("django") is None:  # the core's 3.11 venv: nothing to run here
    collect_ignore_glob = ["*"]
else:
    import psycopg

    from .processes import WorkerProcesses

    KIND = os.environ.setdefault("SKIPLOCK_DJANGO_DB", "sqlite")
    SCHEMA = f"dj_{uuid.uuid4().hex[:12]}"
    DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"

    def _pg(statement: str) -> None:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(statement)

    def _environment() -> None:
        directory = tempfile.mkdtemp(prefix="skiplock-django-")
        os.environ["SKIPLOCK_DJANGO_SQLITE"] = os.path.join(directory, "db.sqlite3")
        os.environ["SKIPLOCK_DJANGO_JOBS_SQLITE"] = os.path.join(directory, "jobs.sqlite3")
        os.environ["SKIPLOCK_DJANGO_UPSTREAM_SQLITE"] = os.path.join(directory, "up.sqlite3")
        if KIND == "postgres":
            _pg(f'CREATE SCHEMA "{SCHEMA}"')
            _pg(f'CREATE SCHEMA "{SCHEMA}_up"')
            os.environ["SKIPLOCK_DJANGO_SCHEMA"] = SCHEMA
        os.environ["DJANGO_SETTINGS_MODULE"] = "tests.django.project.settings"

    _environment()
    import django

    django.setup()

    @pytest.fixture(scope="session", autouse=True)
    def migrated() -> Iterator[None]:
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0)
        call_command("migrate", database="jobs", verbosity=0)
        yield
        connections.close_all()
        if KIND == "postgres":
            _pg(f'DROP SCHEMA "{SCHEMA}" CASCADE')
            _pg(f'DROP SCHEMA "{SCHEMA}_up" CASCADE')

    @pytest.fixture
    def backend() -> Any:
        from django.tasks import default_task_backend

        return default_task_backend

    @pytest.fixture
    def run_worker(backend: Any) -> Any:
        """Run skiplock's worker in burst mode on the backend's app until no job is ready."""
        return lambda: backend.app.run_sync(backend.app.drain())

    @pytest.fixture
    def workers() -> Iterator[WorkerProcesses]:
        """Spawn ``manage.py`` commands as real processes; every one is killed at teardown."""
        processes = WorkerProcesses()
        try:
            yield processes
        finally:
            processes.kill_all()
