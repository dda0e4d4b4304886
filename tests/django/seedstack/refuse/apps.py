"""The refusing receiver, connected when the app is ready."""

from __future__ import annotations

import os
from typing import Any

from django.apps import AppConfig


def refuse(sender: Any, task_result: Any, **kwargs: Any) -> None:
    if task_result.task.module_path == os.environ["SEEDSTACK_REFUSE"]:
        raise RuntimeError("a project's task_enqueued receiver refused it")


class RefuseConfig(AppConfig):
    name = "tests.django.seedstack.refuse"
    label = "seedstack_refuse"

    def ready(self) -> None:
        from django.tasks.signals import task_enqueued

        task_enqueued.connect(refuse, weak=False)
