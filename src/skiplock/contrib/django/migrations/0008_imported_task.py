"""The map from a moved django-tasks-db row's id to its skiplock job (``import_tasks_db``).

It depends on both 0005 and 0007 (each made from 0004 on its own branch), so it is also the
point where the two lines join: one leaf again."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):  # type: ignore[misc]
    dependencies: ClassVar[list[Any]] = [
        ("skiplock", "0005_audit_trail"),
        ("skiplock", "0007_job_payload_permission"),
    ]
    operations: ClassVar[list[Any]] = [
        migrations.CreateModel(
            name="ImportedTask",
            fields=[
                (
                    "old_id",
                    models.CharField(max_length=64, primary_key=True, serialize=False),
                ),
                ("job_id", models.BigIntegerField()),
                ("backend", models.CharField(max_length=32)),
            ],
            options={"db_table": "skiplock_django_imported_task"},
        )
    ]
