"""skiplock's migrations of concurrency keys' turns (PostgreSQL 18, SQLite 17: each key's turns
in ``skiplock_key_turns``, an index over the parked jobs of ordered keys), by skiplock's own
migration list run again (it applies only what is missing)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from ..schema import apply_skiplock_migrations


class Migration(migrations.Migration):  # type: ignore[misc]
    atomic = False  # as 0001: skiplock migrates on its own connection
    dependencies: ClassVar[list[Any]] = [("skiplock", "0010_waiting_state")]
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(apply_skiplock_migrations, migrations.RunPython.noop, elidable=False),
    ]
