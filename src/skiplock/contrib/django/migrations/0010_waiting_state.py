"""skiplock migrations 16 (SQLite) and 17 (PostgreSQL), workflows: the ``waiting`` state among
the job model's choices, and skiplock's own migration list run again (it applies only what is
missing: the waiting partition, the edges, batches, steps and signals)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models

from ..schema import apply_skiplock_migrations


class Migration(migrations.Migration):  # type: ignore[misc]
    atomic = False  # as 0001: skiplock migrates on its own connection
    dependencies: ClassVar[list[Any]] = [("skiplock", "0009_periodic_defer")]
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(apply_skiplock_migrations, migrations.RunPython.noop, elidable=False),
        migrations.AlterField(
            model_name="job",
            name="state",
            field=models.TextField(
                choices=[
                    ("pending", "pending"),
                    ("running", "running"),
                    ("succeeded", "succeeded"),
                    ("cancelled", "cancelled"),
                    ("dead", "dead"),
                    ("waiting", "waiting"),
                ]
            ),
        ),
    ]
