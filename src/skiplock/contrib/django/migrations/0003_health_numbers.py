"""skiplock migration 7 (health numbers and the live-worker registry) for a database whose
0001 ran before it existed: runs skiplock's own migration list again, which applies only what
is missing. One Django migration per skiplock migration, so ``manage.py migrate`` upgrades."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from ..schema import apply_skiplock_migrations


class Migration(migrations.Migration):  # type: ignore[misc]
    atomic = False  # as 0001: skiplock migrates on its own connection
    dependencies: ClassVar[list[Any]] = [("skiplock", "0002_job")]
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(apply_skiplock_migrations, migrations.RunPython.noop, elidable=False)
    ]
