"""The Django test project: settings for PostgreSQL (a schema of its own per run) or a SQLite
file, chosen by ``SKIPLOCK_DJANGO_DB`` (``make test`` runs both); skipped without Django."""

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

    PG = {"HOST": "127.0.0.1", "PORT": "5432", "NAME": "test", "USER": "postgres"}
    KIND = os.environ.get("SKIPLOCK_DJANGO_DB", "sqlite")
    SCHEMA = f"dj_{uuid.uuid4().hex[:12]}"

    def _pg(statement: str) -> None:
        dsn = f"host={PG['HOST']} port={PG['PORT']} dbname={PG['NAME']} user={PG['USER']}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(statement)

    def _database() -> dict[str, Any]:
        if KIND == "postgres":
            _pg(f'CREATE SCHEMA "{SCHEMA}"')
            options = {"options": f"-c search_path={SCHEMA}"}
            return {"ENGINE": "django.db.backends.postgresql", **PG, "OPTIONS": options}
        return _sqlite()

    def _sqlite() -> dict[str, Any]:
        path = os.path.join(tempfile.mkdtemp(prefix="skiplock-django-"), "db.sqlite3")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path}

    def _configure() -> None:
        from django.conf import settings

        schema = SCHEMA if KIND == "postgres" else None
        settings.configure(
            DEBUG=False,
            USE_TZ=True,
            SECRET_KEY="tests",
            DATABASES={"default": _database(), "jobs": _sqlite()},
            ROOT_URLCONF="tests.django.project.urls",
            MIDDLEWARE=[
                "django.contrib.sessions.middleware.SessionMiddleware",
                "django.contrib.auth.middleware.AuthenticationMiddleware",
                "django.contrib.messages.middleware.MessageMiddleware",
            ],
            TEMPLATES=[
                {
                    "BACKEND": "django.template.backends.django.DjangoTemplates",
                    "APP_DIRS": True,
                    "OPTIONS": {
                        "context_processors": [
                            "django.template.context_processors.request",
                            "django.contrib.auth.context_processors.auth",
                            "django.contrib.messages.context_processors.messages",
                        ]
                    },
                }
            ],
            INSTALLED_APPS=[
                "django.contrib.auth",
                "django.contrib.contenttypes",
                "django.contrib.sessions",
                "django.contrib.messages",
                "django.contrib.admin",
                "skiplock.contrib.django",
                "tests.django.project.demo",
            ],
            TASKS={
                "default": {
                    "BACKEND": "skiplock.contrib.django.SkiplockBackend",
                    "QUEUES": ["default", "other"],
                    "OPTIONS": {"schema": schema} if schema else {},
                },
                "jobs": {  # jobs in another database than the default one
                    "BACKEND": "skiplock.contrib.django.SkiplockBackend",
                    "OPTIONS": {"database": "jobs"},
                },
            },
        )
        import django

        django.setup()

    _configure()

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

    @pytest.fixture
    def backend() -> Any:
        from django.tasks import default_task_backend

        return default_task_backend

    @pytest.fixture
    def run_worker(backend: Any) -> Any:
        """Run skiplock's worker in burst mode on the backend's app until no job is ready."""
        return lambda: backend.app._run_sync(backend.app.drain())
