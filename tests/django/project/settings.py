"""Settings of the test project, read from the environment so that the worker processes the
tests spawn (``python -m django concurrent_worker``) load the very same project as pytest.

``tests/django/conftest.py`` sets the variables (a PostgreSQL schema or SQLite files made per
run) before Django starts; a child process inherits them:

- ``SKIPLOCK_DJANGO_DB``: ``postgres`` or ``sqlite``
- ``SKIPLOCK_DJANGO_SCHEMA``: the PostgreSQL schema of this run (postgres only)
- ``SKIPLOCK_DJANGO_SQLITE`` / ``SKIPLOCK_DJANGO_JOBS_SQLITE``: the files of ``default``/``jobs``
- ``SKIPLOCK_DJANGO_UPSTREAM_SQLITE``: the file of ``upstream`` (Django's own tests; on
  PostgreSQL the schema ``<SCHEMA>_up``)
- ``SKIPLOCK_DJANGO_APP_NAME``: the PostgreSQL ``application_name`` of this process's
  connections (Django's and skiplock's), so a test can terminate exactly its worker's backends
- ``SKIPLOCK_DJANGO_CONN_MAX_AGE``: Django's ``CONN_MAX_AGE`` (persistent connections)
- ``SKIPLOCK_DJANGO_USE_TZ``: ``0`` runs the project with ``USE_TZ=False``
- ``SKIPLOCK_DJANGO_TIME_ZONE``: ``TIME_ZONE`` (default ``Europe/London``, UTC half the year)
- ``SKIPLOCK_DJANGO_FAULTS``: fault injections for a test (see ``faults.py``)
- ``SKIPLOCK_DJANGO_EXTRA_APPS``: more ``INSTALLED_APPS``, comma-separated, appended
"""

from __future__ import annotations

import os
from typing import Any

KIND = os.environ.get("SKIPLOCK_DJANGO_DB", "sqlite")
SCHEMA = os.environ.get("SKIPLOCK_DJANGO_SCHEMA", "")
APP_NAME = os.environ.get("SKIPLOCK_DJANGO_APP_NAME", "skiplock-django-tests")
CONN_MAX_AGE = int(os.environ.get("SKIPLOCK_DJANGO_CONN_MAX_AGE", "0"))
PG = {"HOST": "127.0.0.1", "PORT": "5432", "NAME": "test", "USER": "postgres"}


def _sqlite(variable: str) -> dict[str, Any]:
    return {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ[variable]}


def _default() -> dict[str, Any]:
    if KIND == "postgres":
        options = {"options": f"-c search_path={SCHEMA}", "application_name": APP_NAME}
        return {
            "ENGINE": "django.db.backends.postgresql",
            **PG,
            "OPTIONS": options,
            "CONN_MAX_AGE": CONN_MAX_AGE,
        }
    return _sqlite("SKIPLOCK_DJANGO_SQLITE")


DEBUG = False
USE_TZ = os.environ.get("SKIPLOCK_DJANGO_USE_TZ", "1") != "0"
TIME_ZONE = os.environ.get("SKIPLOCK_DJANGO_TIME_ZONE", "Europe/London")
SECRET_KEY = "tests"


def _upstream() -> dict[str, Any]:
    """The store of Django's own task tests (tests/django/upstream): a fresh one, as in
    Django's test run (they assert, say, that result id 123 does not exist)."""
    if KIND == "postgres":
        return {**_default(), "OPTIONS": {"options": f"-c search_path={SCHEMA}_up"}}
    return _sqlite("SKIPLOCK_DJANGO_UPSTREAM_SQLITE")


DATABASES = {
    "default": _default(),
    "jobs": _sqlite("SKIPLOCK_DJANGO_JOBS_SQLITE"),
    "upstream": _upstream(),
}
ROOT_URLCONF = "tests.django.project.urls"
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
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
]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.admin",
    "django_tasks_db",
    "skiplock.contrib.django",
    "tests.django.project.demo",
    *filter(None, os.environ.get("SKIPLOCK_DJANGO_EXTRA_APPS", "").split(",")),
]
TASKS = {
    "default": {
        "BACKEND": "skiplock.contrib.django.SkiplockBackend",
        "QUEUES": ["default", "other"],
        "OPTIONS": {"schema": SCHEMA} if KIND == "postgres" else {},
    },
    "jobs": {  # jobs in another database than the default one
        "BACKEND": "skiplock.contrib.django.SkiplockBackend",
        "OPTIONS": {"database": "jobs"},
    },
    "tasksdb": {  # django-tasks-db's own backend, the seed's stack, served by concurrent_worker
        "BACKEND": "django_tasks_db.DatabaseBackend",
        "QUEUES": ["default", "other"],
    },
    "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"skiplock": {"handlers": ["stderr"], "level": "INFO"}},
}

if os.environ.get("SKIPLOCK_DJANGO_FAULTS"):
    from . import faults

    faults.install(os.environ["SKIPLOCK_DJANGO_FAULTS"])
