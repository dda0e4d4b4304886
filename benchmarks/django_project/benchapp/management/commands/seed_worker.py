"""django-tasks-concurrent 0.7.3's own worker (the seed as released) on the ``tasksdb`` alias;
its ``concurrent_worker`` name is taken by skiplock's in this project."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--concurrency", type=int, default=10)
        parser.add_argument("--interval", type=float, default=0.1)

    def handle(self, *args: Any, **options: Any) -> None:
        from django_tasks_concurrent import run_worker

        run_worker(
            concurrency=options["concurrency"],
            interval=options["interval"],
            queue_name="default",
            backend_name="tasksdb",
        )
