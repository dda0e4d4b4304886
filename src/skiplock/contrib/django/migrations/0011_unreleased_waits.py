"""skiplock migrations 17 (SQLite) and 18 (PostgreSQL), the kept release of a job that ended
while it waited for its parents (``skiplock_unreleased``: its retry waits for them again), by
skiplock's own migration list run again (it applies only what is missing)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from ..schema import apply_skiplock_migrations


class Migration(migrations.Migration):  # type: ignore[misc]
    atomic = False  # as 0001: skiplock migrates on its own connection
    dependencies: ClassVar[list[Any]] = [("skiplock", "0010_waiting_state")]
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(apply_skiplock_migrations, migrations.RunPython.noop, elidable=False)
    ]
