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
        # A worker resolves tasks by module path, but importing every app's ``tasks`` module
        # up front registers them (and their options) before the first job is claimed.
        autodiscover_modules("tasks")
