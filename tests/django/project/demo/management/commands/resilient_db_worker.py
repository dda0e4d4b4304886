"""django-tasks-db's ``db_worker`` after ``install_resilient_run()`` (what a project that keeps
that worker does), for the dropped-connection test."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand

from skiplock.contrib.django import install_resilient_run


class Command(BaseCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        install_resilient_run()
        call_command(
            "db_worker", "--backend=tasksdb", "--interval=0.1", "--no-startup-delay", "--no-reload"
        )
