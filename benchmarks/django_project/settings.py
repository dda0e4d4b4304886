"""Settings of the Django benchmark project (``benchmarks/django_bench.py``), read from the
environment so that the worker processes the bench spawns load the same databases.

``BENCH_DJANGO_DB`` (``postgres``/``sqlite``), ``BENCH_DJANGO_SCHEMA`` (PostgreSQL),
``BENCH_DJANGO_SQLITE`` (the SQLite file). ``default`` is skiplock's backend, ``tasksdb``
django-tasks-db's; django-tasks-concurrent (the seed) serves ``tasksdb`` in its own runs.
"""

from __future__ import annotations

import os

KIND = os.environ.get("BENCH_DJANGO_DB", "sqlite")
SCHEMA = os.environ.get("BENCH_DJANGO_SCHEMA", "")

if KIND == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "HOST": "127.0.0.1",
            "PORT": "5432",
            "NAME": "test",
            "USER": "postgres",
            "OPTIONS": {"options": f"-c search_path={SCHEMA}", "application_name": "bench"},
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("BENCH_DJANGO_SQLITE", "bench.sqlite3"),
            "OPTIONS": {"timeout": 30},
        }
    }

DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
SECRET_KEY = "bench"
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "skiplock.contrib.django",  # first: its concurrent_worker is the one `manage.py` runs
    "django_tasks",
    "django_tasks_db",
    "django_tasks_concurrent",
    "benchmarks.django_project.benchapp",
]
# Both apps on purpose (the seed's models and worker beside skiplock's, compared in one run):
# skiplock's concurrent_worker, first above, is the one `manage.py` runs and the seed's worker
# is reached as `seed_worker`, so the command-name collision check is silenced here, knowingly.
SILENCED_SYSTEM_CHECKS = ["skiplock.E007"]
TASKS = {
    "default": {
        "BACKEND": "skiplock.contrib.django.SkiplockBackend",
        "OPTIONS": {"schema": SCHEMA} if KIND == "postgres" else {},
    },
    "tasksdb": {"BACKEND": "django_tasks_db.DatabaseBackend"},
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
    # Django's task signals log two INFO lines per task (core and backport alike): quiet for
    # every system, so the drain measures the workers, not a log file
    "loggers": {
        "django.tasks": {"level": "WARNING"},
        "django_tasks": {"level": "WARNING"},
        "django_tasks_db": {"level": "WARNING"},
        "django_tasks_concurrent": {"level": "WARNING"},
    },
}
