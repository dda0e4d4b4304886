"""skiplock migration 11 (the audit trail of person actions): runs skiplock's own migration
list again, which applies only what is missing."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from ..schema import apply_skiplock_migrations


class Migration(migrations.Migration):  # type: ignore[misc]
    atomic = False  # as 0001: skiplock migrates on its own connection
    dependencies: ClassVar[list[Any]] = [("skiplock", "0005_payload_version")]
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(apply_skiplock_migrations, migrations.RunPython.noop, elidable=False)
    ]
