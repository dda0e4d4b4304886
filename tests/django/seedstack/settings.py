"""The seed-stack project's settings: the test project's databases (the same environment,
``tests/django/project/settings.py``), but the seed's ``TASKS`` and apps.

Switched as docs/django.md says: ``django_tasks_concurrent`` became ``skiplock.contrib.django``
in ``INSTALLED_APPS``, and a ``SkiplockBackend`` alias was added for the move of the rows
(``manage.py skiplock_import_tasks_db``); its schema also holds the ``@periodic`` ledger.
"""

from __future__ import annotations

import os

from tests.django.project.settings import DATABASES, KIND, SCHEMA

DEBUG = False
USE_TZ = True
TIME_ZONE = "Europe/London"
SECRET_KEY = "seed-stack"
DATABASES = {"default": DATABASES["default"]}
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django_tasks",  # the seed's README: the backport, its @task
    "django_tasks_db",
    "skiplock.contrib.django",  # was "django_tasks_concurrent"
    "tests.django.seedstack.shop",
]
if os.environ.get("SEEDSTACK_REFUSE"):  # a test's schedule that always fails to enqueue
    INSTALLED_APPS.append("tests.django.seedstack.refuse")
TASKS = {
    "default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]},
    "skiplock": {
        "BACKEND": "skiplock.contrib.django.SkiplockBackend",
        "QUEUES": ["default"],
        "OPTIONS": {"schema": SCHEMA} if KIND == "postgres" else {},
    },
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"skiplock": {"handlers": ["stderr"], "level": "INFO"}},
}
