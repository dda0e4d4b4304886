"""The map from a moved django-tasks-db row's id to its skiplock job (``import_tasks_db``)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):  # type: ignore[misc]
    dependencies: ClassVar[list[Any]] = [("skiplock", "0008_job_payload_permission")]
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
