"""Apply skiplock's own migration list (the one source of truth) to the tasks database."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from ..schema import apply_skiplock_migrations


class Migration(migrations.Migration):  # type: ignore[misc]
    # Not atomic: skiplock applies its SQL on its own connection, which a Django transaction
    # holding SQLite's write lock would block.
    atomic = False
    initial = True
    dependencies: ClassVar[list[Any]] = []
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(apply_skiplock_migrations, migrations.RunPython.noop, elidable=False)
    ]
