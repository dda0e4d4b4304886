"""The unmanaged ``Job`` model over skiplock's table (for the admin; creates nothing)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models

from ..models import Timestamp


def _fields() -> list[tuple[str, Any]]:
    text = models.TextField
    return [
        ("id", models.BigIntegerField(primary_key=True, serialize=False)),
        ("queue", text()),
        ("task", text()),
        (
            "state",
            text(
                choices=[(s, s) for s in ("pending", "running", "succeeded", "cancelled", "dead")]
            ),
        ),
        ("priority", models.IntegerField()),
        ("attempt", models.IntegerField()),
        ("max_attempts", models.IntegerField()),
        ("args", models.JSONField()),
        ("kwargs", models.JSONField()),
        ("errors", models.JSONField()),
        ("audit", models.JSONField()),
        ("result", models.JSONField(null=True)),
        ("run_at", Timestamp()),
        ("created_at", Timestamp()),
        ("attempted_at", Timestamp(null=True)),
        ("finished_at", Timestamp(null=True)),
        ("locked_by", text(null=True)),
    ]


class Migration(migrations.Migration):  # type: ignore[misc]
    dependencies: ClassVar[list[Any]] = [("skiplock", "0001_skiplock_schema")]
    operations: ClassVar[list[Any]] = [
        migrations.CreateModel(
            name="Job",
            fields=_fields(),
            options={"db_table": "skiplock_jobs", "managed": False, "ordering": ("-id",)},
        )
    ]
