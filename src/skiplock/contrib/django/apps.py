"""The Django app: its migrations create skiplock's tables; ready() finds every app's tasks."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class SkiplockConfig(AppConfig):  # type: ignore[misc]
    name = "skiplock.contrib.django"
    label = "skiplock"
    verbose_name = "skiplock"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core import checks

        from ._ledger import check_periodic_backends
        from .checks import check_command_names, check_settings

        checks.register(check_settings)
        checks.register(check_periodic_backends)
        checks.register(check_command_names)
        # A worker runs only tasks registered in its process (a module path a job row holds is
        # never imported: issue 22), so every app's ``tasks`` module is imported up front; one
        # that fails to import stops the process here with that ImportError, loudly, before
        # any job is claimed (issue 21 asked for that error to be seen, not "unknown task").
        autodiscover_modules("tasks")
