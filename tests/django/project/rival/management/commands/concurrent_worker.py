"""A second app's ``concurrent_worker`` (as django-tasks-concurrent's, installed beside
skiplock): the system check must name the collision."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand


class Command(BaseCommand):  # type: ignore[misc]
    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write("the rival's worker")
