"""The unmanaged ``PeriodicDefer`` model over skiplock's slot table (creates nothing)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models

from ..models import Timestamp


class Migration(migrations.Migration):  # type: ignore[misc]
    dependencies: ClassVar[list[Any]] = [("skiplock", "0008_imported_task")]
    operations: ClassVar[list[Any]] = [
        migrations.CreateModel(
            name="PeriodicDefer",
            fields=[
                ("schedule", models.TextField(primary_key=True, serialize=False)),
                ("defer_at", Timestamp(db_column="slot")),
                ("created", Timestamp(db_column="created_at")),
                ("job_id", models.BigIntegerField(null=True)),
                ("skipped", models.BooleanField()),
            ],
            options={
                "db_table": "skiplock_cron_slots",
                "ordering": ("-defer_at",),
                "managed": False,
            },
        )
    ]
