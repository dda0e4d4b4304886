"""The seed-stack project after the last step of the switch (docs/django.md): its rows moved by
``import_tasks_db``, its ``default`` task backend is now the ``SkiplockBackend``."""

from __future__ import annotations

from tests.django.seedstack.settings import *  # noqa: F403
from tests.django.seedstack.settings import TASKS

TASKS = {"default": TASKS["skiplock"]}
